// Package queue is the waiter table behind dblock.Fair: a FIFO of the
// waiters of each lock name, kept in the dblock_waiters table (created by
// package migrations).
//
// The FIFO rule: a waiter joins the queue by inserting a row, and the row's
// auto-increment id orders the queue. A waiter proves it is alive with a
// heartbeat judged by the database clock (expires_at, pushed forward every
// TTL/3). The head of a queue is the oldest waiter whose row has not
// lapsed. rowlock gives a lock with live fair waiters only to the head,
// however its other contenders asked: a waiter whose process or connection
// died stops heartbeating and is passed over after one TTL
// (WithWaiterTTL), or sooner once its session is seen gone. One Queue
// heartbeats all its waiters with one statement, so the load on the
// database does not grow with the number of waiters in a process.
//
// Users of rowlock never need this package to wait fairly: Acquire with
// dblock.Fair joins the queue. It is for those who look at the queue and
// clean it up:
//
//	q, err := queue.New(db)
//	if err != nil {
//		return err
//	}
//	waiters, err := q.Waiters(ctx, "jobs/report") // the head first
//	for _, w := range waiters {
//		fmt.Println(w.Position, w.OwnerHost, w.Waited)
//	}
//
// Dead waiters' rows stay until deleted: package reaper deletes them
// (DeleteDead) on its schedule.
package queue
