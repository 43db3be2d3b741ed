// Package forupdate gives locks that are row locks held by open
// transactions (SELECT ... FOR UPDATE). Pick it over rowlock when the work
// done under a lock must commit exactly when the lock is released: it is
// done in the lock's own transaction (Lock.Tx). A holder whose process or
// connection dies frees the lock at once.
//
//	locker, err := forupdate.New(db) // tables from migrations.Up
//	if err != nil {
//		return err
//	}
//	defer locker.Close()
//	lock, err := locker.Acquire(ctx, "jobs/billing")
//	if err != nil {
//		return err
//	}
//	tx := lock.(*forupdate.Lock).Tx()
//	// ... the job's writes, in tx ...
//	return lock.Release(ctx) // commits tx
//
// Example runs this against a real database; Locker.Semaphore and
// Locker.Readers have examples too.
//
// Acquire waits in the database; TryAcquire uses NOWAIT and returns
// dblock.ErrNotAcquired at once. Ending Acquire's context stops the wait on
// the server too. Each held or awaited lock keeps one connection of the
// pool: size the pool for them (WithConnTimeout bounds the wait for one,
// then ErrNoConnection). An Acquire whose context carries a holder's owner
// re-enters the lock. dblock.Fair and dblock.MinHold are refused: the
// database orders the waiters, and a lock cannot outlive its transaction.
// On a Galera cluster, row locks are per node: Acquire refuses to lock there
// (ErrMultiPrimary) unless WithSingleNode says all locks go to one node.
//
// # Safety rules
//
// Tokens: the fencing token is drawn only once the row lock is held, from
// a counter no rollback undoes (a sequence, or on MySQL 8.0 an
// AUTO_INCREMENT). So it is larger than every earlier holder's. On
// PostgreSQL it carries the WAL timeline in bits 40 and up, so a promoted
// standby never hands it out again.
//
// Liveness: a holder cut off by the network is ended by the server after
// the TTL (an idle-in-transaction or wait timeout set on its session). A
// live holder pings its session every TTL/3 and declares the lock lost
// after TTL minus a tenth without a successful ping: before the server
// could end its session.
//
// The arguments, the schema and the costs are in the repository's
// docs/design.md, section "forupdate: row locks of open transactions".
package forupdate
