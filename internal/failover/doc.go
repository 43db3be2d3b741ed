// Package failover holds sqllock's failover tests (failover_test.go): on a
// PostgreSQL primary and a streaming hot standby of the test's own
// (testdb.NewReplicated), holders take locks through a pool whose DSN
// lists both servers, the roles are switched over as an operator would,
// and the tests check what each kind of lock does then: which holders keep
// their lock and which lose it and say why, that the same Locker goes on
// working on the promoted server, that tokens issued there are larger
// than every token issued before, and that a read-only standby is refused
// with dblock.ErrReadOnly.
package failover
