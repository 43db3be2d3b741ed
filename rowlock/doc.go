// Package rowlock implements dblock.Locker with a row per held lock in the
// table dblock_locks (create it with package migrations).
//
// Each name has one row; the primary key on the name lets exactly one
// contender create it. The row carries a lease (expires_at, judged by the
// database clock) that the holder renews every TTL/3. Releasing ends the
// lease at once; a row whose lease has lapsed, released or not, is taken over
// by the next contender with one UPDATE, so a crashed holder blocks others
// for at most one TTL. The host and owner columns make the lock reentrant.
//
// The fencing token lives in the row and grows by one at every takeover,
// under the row lock. Released rows stay, keeping the token, until Sweep (run
// by package reaper) deletes lapsed rows; it first raises the token counter
// of each row's stripe to the row's token, and a fresh row draws its first
// token from that counter in the statement or transaction that inserts it.
// So tokens grow strictly per name across releases, takeovers, sweeps and
// restarts. Do not delete lock rows by hand.
//
// A holder that cannot renew in time closes Done and cancels its Context
// before the database could consider the lease expired. Data written under
// the lock can be fenced: CheckHeld, run in the writing transaction, proves
// the lock is still held and keeps it from being taken until that
// transaction ends.
//
// Waiting: on PostgreSQL, releases are announced with NOTIFY and one
// listening connection per Locker wakes its waiters; on MySQL waiters poll
// with backoff and jitter. Waiters in the same process are woken directly by
// a release. Only the first waiter of a name in each Locker is woken, so a
// release never stampedes: the fair waiter with the oldest place in the
// queue, or with none queued the longest-waiting one.
//
// What the tables hold can be looked at without SQL: Locks and Held show
// the locks taken now, Waiters and AllWaiters the fair queues, Lapsed
// counts what is left to delete (the sqllock command's status uses them).
// Sweep and DeleteDeadWaiters delete it, in batches (package reaper runs
// them on a schedule).
//
// Contention never reaches callers: deadlocks, lock wait timeouts,
// serialization failures and unique violations between contenders (MySQL
// 1213, 1205, 1062; PostgreSQL 40P01, 40001, 23505). A try to take a lock
// retries them lockkit.MaxContentionRetries times, and when that budget runs
// out it counts as not acquired: TryAcquire returns dblock.ErrNotAcquired,
// Acquire keeps waiting. Every other statement (Release, Refresh, renewals,
// Sweep, and the fair queue's enqueue, heartbeat and leave) retries until it
// succeeds or its context ends, and then returns an error wrapping the
// context's error. CheckHeld runs in the caller's transaction, which the
// contention may have aborted: it does not retry, and reports that the hold
// could not be proven as dblock.ErrLockLost.
package rowlock
