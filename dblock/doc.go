// Package dblock is the contract of sqllock: the Locker and Lock interfaces,
// acquisition options, sentinel errors, the owner identity that makes locks
// reentrant, and Do, which runs a function under a lock. It imports no
// driver and no scheduler.
//
// The implementations live in their own packages: rowlock (a lease row in a
// lock table, with fencing tokens) and forupdate (a row locked by an open
// transaction). Code that only needs "run this under a lock" depends on
// dblock alone and receives a Locker. Built on any Locker: package leader
// (leader election), cronguard (each tick of a robfig/cron job on one
// replica) and gocronlock (the same for gocron).
//
// # Owners and reentrancy
//
// Every acquisition is made on behalf of an Owner: a host (host name and
// process id) and a 128-bit random id. The owner travels in the context: an
// Acquire whose context carries an owner that already holds the lock
// re-enters it (the hold count grows, the token stays), and Lock.Context()
// carries the holder's owner, so code running under a lock can take it again
// without deadlocking itself. A context without an owner gets a fresh one,
// so two unrelated goroutines never share a lock by accident.
//
// # Errors and retries
//
// Errors wrap this package's sentinels; test for them with errors.Is. The
// ones an acquisition's caller acts on: ErrNotAcquired (another owner holds
// the lock: skip, or wait), ErrUnavailable (the database cannot be reached:
// try later, alert), ErrReadOnly (a standby after a failover) and
// ErrSchemaMissing (run migrations.Up). TryAcquire gives up at once and
// Acquire waits until ctx ends; TryAcquireRetry, in between, tries a
// bounded number of times with growing, jittered pauses (Retry).
//
// # Time
//
// Leases are judged by the database clock only. Client clocks are used for one
// thing: a holder measures, on its own monotonic clock, how long ago it last
// renewed successfully, and declares the lock lost (closing Done) before the
// database could consider the lease expired.
package dblock
