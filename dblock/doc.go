// Package dblock is the contract of sqllock: the Locker and Lock
// interfaces, the options of an acquisition, the sentinel errors, the
// owner identity that makes locks reentrant, and Do, which runs a function
// under a lock. Code that only needs "run this under a lock" depends on
// dblock alone and receives a Locker. It imports no driver and no
// scheduler.
//
//	err := dblock.Do(ctx, locker, "jobs/report", func(ctx context.Context) error {
//		return report(ctx) // ctx is canceled if the lock is lost
//	}, dblock.TTL(30*time.Second))
//
// ExampleDo runs this against a real database. The Lockers are in rowlock
// (a row with a lease) and forupdate (a row locked by an open
// transaction); leader, cronguard and gocronlock work over any of them.
//
// # Owners and reentrancy
//
// Every acquisition is made on behalf of an Owner: a host (host name and
// process id) and a 128-bit random id, carried in the context. An Acquire
// whose context carries an owner that holds the lock re-enters it: the
// hold count grows and the token stays. Lock.Context carries the holder's
// owner, so code running under a lock can take it again without
// deadlocking itself. A context without an owner gets a fresh one, so two
// unrelated goroutines never share a lock by accident (WithOwner sets one).
//
// # Errors
//
// Errors wrap this package's sentinels; test them with errors.Is. The ones
// a caller acts on: ErrNotAcquired (another owner holds the lock), ErrUnavailable
// (the database cannot be reached), ErrReadOnly (a standby after a
// failover) and ErrSchemaMissing (run migrations.Up). TryAcquire gives up
// at once, Acquire waits until ctx ends, and TryAcquireRetry tries a
// bounded number of times with growing, jittered pauses.
//
// # Safety rule: the database clock decides
//
// Leases are judged by the database clock only. A client clock is used for
// one thing: a holder measures, on its own monotonic clock, how long ago it
// last renewed, and declares the lock lost (closing Done) before the
// database could consider the lease expired. The repository's
// docs/design.md explains how each Locker keeps this rule.
package dblock
