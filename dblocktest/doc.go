// Package dblocktest is sqllock's test kit: an in-memory dblock.Locker for
// the unit tests of code that takes locks, and TestLocker, the conformance
// suite every dblock.Locker must pass.
//
// # Unit tests of code that takes locks
//
// Code that depends on a dblock.Locker (not on rowlock or forupdate) can
// be given NewLocker's in-memory Locker in its unit tests: no database,
// no goroutines, the same validation and errors as the database Lockers.
// A test makes a held lock lapse or be lost on demand, to check that the
// code stops when its lock's Context ends:
//
//	locker := dblocktest.NewLocker()
//	job := NewReportJob(locker) // the code under test, taking "jobs/report"
//	go job.Run(ctx)
//	...
//	locker.Lapse("jobs/report") // or locker.Lose("jobs/report", cause)
//	// the job's lock.Context() is canceled, Done closed, Err wraps dblock.ErrLockLost
//
// Make one Locker per test: it is the lock space, as a database is, so
// code that stands for several replicas shares it, each replica's
// acquisitions told apart by their owners.
//
// The Locker has rowlock's lock kinds too, with the same methods, rules
// and errors, so code written against rowlock's can be tested the same
// way: Semaphore(limit) (dblock.ErrLimitMismatch), Readers and Writers
// (dblock.ErrUpgrade), AcquireAll and TryAcquireAll. Their holds are
// lost with the rest of their name's by Lapse and Lose, and Held and
// Waiting count them:
//
//	api, _ := locker.Semaphore(2)
//	permit, _ := api.Acquire(ctx, "partner-api")
//	locker.Lapse("partner-api") // permit.Done() is closed
//
// # Conformance of a Locker
//
// TestLocker checks, in subtests, what dblock documents of every Locker:
// exclusion under concurrency, waiting and giving up, reentrancy, tokens,
// loss signalled through Done, bad input refused with typed errors, and
// the lock kinds the Harness declares (semaphores, read/write locks,
// AcquireAll). Run it from a test of the implementation:
//
//	func TestConformance(t *testing.T) {
//		dblocktest.TestLocker(t, dblocktest.Harness{
//			New:  func(t *testing.T) dblock.Locker { return newLockerOnTestDB(t) },
//			Lose: func(t *testing.T, k dblock.Lock) { endLeaseInTestDB(t, k.Name()) },
//		})
//	}
//
// For a Locker over rowlock (a wrapper of your own), Lose ends the lease
// with rowlock's Locker.Revoke, never by writing to the lock table:
//
//	Lose: func(t *testing.T, k dblock.Lock) {
//		if _, err := operator.Revoke(context.Background(), k.Name()); err != nil {
//			t.Fatal(err)
//		}
//	},
//
// This module runs it for rowlock and forupdate on PostgreSQL and MariaDB
// (rowlock with its lock kinds, and on SQLite), and for the in-memory
// Locker with its kinds.
package dblocktest
