// Package queue keeps the FIFO of fair waiters in the dblock_waiters table
// (created by package migrations).
//
// A waiter enqueues by inserting a row; the auto-increment id orders the
// queue. A waiter proves it is alive with a heartbeat judged by the database
// clock (expires_at, pushed forward every TTL/3); a waiter whose process or
// connection died stops heartbeating, lapses after one TTL, and is passed
// over: the head of the queue is the oldest waiter whose row has not lapsed.
// One Queue heartbeats all its waiters with one statement, so the load on
// the database does not grow with the number of waiters in a process.
//
// rowlock decides who may take a lock from the queue (a lock with live
// waiters goes only to the oldest of them, however its other contenders
// asked); this package only keeps the queue. It is internal because it is
// how rowlock implements dblock.Fair: users see the queue through rowlock
// (Locker.Waiters, WithWaiterTTL), and the reaper deletes dead waiters
// through rowlock too (Locker.DeleteDeadWaiters).
package queue
