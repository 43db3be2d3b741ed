// Package admin is for the people and tools that look after the lock
// table (sqllock status, dashboards, a runbook): it lists the locks taken
// now and revokes a stuck holder's lease. Applications that take locks
// use rowlock; the reaper package deletes lapsed rows; package queue lists
// and deletes fair waiters.
//
//	a, err := admin.New(db)
//	if err != nil {
//		return err
//	}
//	defer a.Close()
//	locks, err := a.Locks(ctx, 100)
//	for _, k := range locks {
//		fmt.Println(k.Name, k.OwnerHost, k.Token, k.ExpiresIn)
//	}
//
// Everything it reports is judged by the database clock. Listing is for
// looking, not for deciding who may act: a lock listed as held may be
// released a moment later. Only a hold's own handle (rowlock's Lock,
// with CheckHeld) proves it.
package admin
