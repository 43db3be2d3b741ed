// Package dblocktest is sqllock's test kit: NewLocker, an in-memory
// dblock.Locker for the unit tests of code that takes locks, and
// TestLocker, the conformance suite every dblock.Locker must pass.
//
//	locker := dblocktest.NewLocker()
//	job := NewReportJob(locker) // the code under test, taking "jobs/report"
//	go job.Run(ctx)
//	...
//	locker.Lapse("jobs/report") // or locker.Lose("jobs/report", cause)
//	// the job's lock.Context() is canceled, Done closed, Err wraps dblock.ErrLockLost
//
// ExampleNewLocker, ExampleLocker_Lapse, ExampleLocker_Lose and
// ExampleTestLocker show each use.
//
// # Unit tests of code that takes locks
//
// The in-memory Locker needs no database and starts no goroutine. It has
// the database Lockers' validation and errors, reentrancy, tokens, Fair and
// MinHold. Make one per test: it is the lock space, as a database is, so
// code standing for several replicas shares it. A test makes a held lock
// lapse or be lost on demand, and Held and Waiting tell who holds or
// waits.
//
// It has rowlock's lock kinds too, with the same methods, rules and
// errors: Semaphore(limit), Readers and Writers, AcquireAll and
// TryAcquireAll. Lapse and Lose end their holds with the rest of the
// name's.
//
// # Conformance of a Locker
//
// TestLocker checks, in subtests, what dblock documents of every Locker:
// exclusion under concurrency, waiting and giving up, reentrancy, tokens,
// loss signalled through Done, bad input refused with typed errors, and the
// lock kinds the Harness declares. Run it from a test of the
// implementation:
//
//	func TestConformance(t *testing.T) {
//		dblocktest.TestLocker(t, dblocktest.Harness{
//			New:  func(t *testing.T) dblock.Locker { return newLockerOnTestDB(t) },
//			Lose: func(t *testing.T, k dblock.Lock) { endLeaseInTestDB(t, k.Name()) },
//		})
//	}
//
// For a Locker built on rowlock, Lose ends the lease with rowlock's
// Revoke, never by writing to the lock table. This module runs the suite
// on rowlock and forupdate (PostgreSQL, MariaDB; rowlock on SQLite too) and
// on the in-memory Locker.
package dblocktest
