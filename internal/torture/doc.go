// Package torture holds sqllock's torture suite (torture_test.go). On each
// database, worker processes (worker_test.go), several goroutines each,
// hammer a few lock names of every kind. The kinds are rowlock mutexes,
// unfair and fair; forupdate; rowlock semaphores, read/write locks, and
// multi-name locks taken with AcquireAll beside plain locks of the same
// names; forupdate's semaphores and read/write locks. Each worker spreads
// its holds evenly over the kinds.
//
// Meanwhile a fault loop (faults_test.go) does all of this:
//   - SIGKILLs workers;
//   - SIGSTOPs and SIGCONTs them, so that a holder is paused past its
//     lease, as by a long GC pause;
//   - cuts every connection through a proxy;
//   - has the server kill workers' sessions (pg_terminate_backend, KILL),
//     always including those that hold the session marker of a held lock
//     (rowlock's crash detection);
//   - switches the server read-only for a while and back (PostgreSQL
//     default_transaction_read_only through ALTER SYSTEM, MySQL
//     read_only);
//   - restarts the database server once (server_test.go).
//
// Two workers run with their wall clock an hour off, one ahead and one
// behind, through SQLLOCK_TEST_CLOCK_OFFSET and package internal/clock.
// The clock package's doc says why that is how a skewed host looks to Go.
// The suite checks that they saw that skew and held every kind of lock.
//
// On PostgreSQL two more workers reach the server through PgBouncer in
// transaction mode. SQLLOCK_PGBOUNCER_DSN names it; by default it is the
// one `.ci/pgbouncer start` runs on 127.0.0.1:6432. The suite fails when
// it cannot reach it, or when it fronts another server. One worker takes
// its session connection from the pooled pool, so rowlock must detect the
// pooler and go without markers. The other has rowlock.WithSessionDB on a
// direct connection. PgBouncer 1.18 itself crashes under these faults now
// and then (see keepPoolerUp). The suite then starts it again
// (SQLLOCK_TORTURE_RESTART_PGBOUNCER, by default `.ci/pgbouncer start`)
// and counts it. On MySQL the workers connect as a user of their own with
// rights on the lock tables only, which read_only binds; the suite creates
// it and drops it.
//
// Every holder keeps a ledger (ledger_test.go) of the database-clock
// interval in which it believed it held a lock: a start record as soon as
// the hold begins, an end record before it releases. Afterwards a checker
// proves that no two intervals for a mutex's name overlap and that tokens only
// grew, counting a SIGKILLed holder's unfinished hold as held until it was
// killed. Each kind is held to its own promise:
//   - a semaphore never has more holders than its limit at once, and each
//     of its permit slots is a mutex with growing tokens; a forupdate
//     semaphore's tokens, drawn from one counter, are never handed out
//     twice, in any slot;
//   - a read/write lock's writer overlaps no other holder, and its token
//     is above that of every hold begun before it; a reader's token is at
//     least that of every writer begun before it;
//   - a multi-lock's hold is a hold of each of its names, checked as a
//     mutex against every other hold of that name.
//
// The checker's own test (check_test.go) feeds it ledgers that break each
// of these. The suite also requires:
//   - every worker that was not killed to exit cleanly, with holds
//     recorded and no goroutine leaked;
//   - no acquisition failed with a server error that none of the faults
//     explains: contention that reached the caller, an error like MySQL's
//     1467, a read-only refusal not reported as dblock.ErrReadOnly;
//   - every fault to have happened and been seen by the workers:
//     ErrReadOnly from an acquisition or as a lost lock's cause, the pooler
//     detected where it should be and only there;
//   - every lock to be acquirable at the end.
//
// It prints what it checked and survived.
//
// TestSoak (soak_test.go) runs the same for as long as -soak says, with
// more names, goroutines and briefer holds, restarting the server every
// two minutes, and fails unless each database reaches -soak-min (100,000)
// ledger-checked acquisitions; without -soak it runs nothing.
// CONTRIBUTING.md (Torture and soak) gives the command and its figures.
//
// It restarts the database servers, kills their sessions and makes them
// read-only, so it must not run beside other tests that use them: the
// README's test command runs packages one at a time (go test -p 1). The
// restart commands default to this project's machines and can be
// replaced with SQLLOCK_TORTURE_RESTART_POSTGRES and
// SQLLOCK_TORTURE_RESTART_MYSQL (shell commands; `true` skips the restart,
// which the summary then says). Under -short the run is shorter and
// neither restarts the servers nor switches them read-only. A run stopped while the server was read-only
// leaves PostgreSQL read-only (ALTER SYSTEM persists); the next run
// switches it back and says so.
package torture
