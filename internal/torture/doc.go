// Package torture holds sqllock's torture suite (torture_test.go): on each
// database, worker processes (worker_test.go), several goroutines each,
// hammer a few lock names of every kind (rowlock unfair and fair,
// forupdate) while a fault loop SIGKILLs workers, SIGSTOPs and SIGCONTs
// them (a holder paused past its lease, as by a long GC pause), cuts every
// connection through a proxy, and restarts the database server once.
//
// Two workers run with their wall clock an hour off, one ahead and one
// behind, through SQLLOCK_TEST_CLOCK_OFFSET and package internal/clock
// (whose doc says why that is how a skewed host looks to Go); the suite
// checks that they saw that skew and held every kind of lock.
//
// Every holder keeps a ledger (ledger_test.go) of the database-clock
// interval in which it believed it held a lock: a start record as soon as
// the hold begins, an end record before it releases. Afterwards a checker
// proves that no two intervals for a name overlap and that tokens only
// grew, counting a SIGKILLed holder's unfinished hold as held until it was
// killed. The suite also requires every worker that was not killed to exit
// cleanly, with holds recorded, no goroutine leaked and no acquisition
// failed with a server error that none of the faults explains (contention
// that reached the caller, an error like MySQL's 1467), every fault to
// have happened, and every lock to be acquirable at the end; it prints
// what it checked and survived.
//
// It restarts the database servers, so it must not run beside other tests
// that use them: the README's test command runs packages one at a time
// (go test -p 1). The restart commands default to this project's machines
// and can be replaced with SQLLOCK_TORTURE_RESTART_POSTGRES and
// SQLLOCK_TORTURE_RESTART_MYSQL (shell commands; `true` skips the restart,
// which the summary then says). Under -short the run is shorter and does
// not restart the servers.
package torture
