// Package torture holds sqllock's torture suite (torture_test.go): several
// processes hammer a few lock names on each database while a fault loop
// SIGKILLs holders, cuts their connections and restarts the database
// server; every holder keeps a ledger of the database-clock interval in
// which it believed it held a lock, and a checker proves afterwards that no
// two intervals for a name overlap and tokens only grew.
//
// It restarts the database servers, so it must not run beside other tests
// that use them: the README's test command runs packages one at a time
// (go test -p 1). The restart commands default to this project's machines
// and can be replaced with SQLLOCK_TORTURE_RESTART_POSTGRES and
// SQLLOCK_TORTURE_RESTART_MYSQL (shell commands).
package torture
