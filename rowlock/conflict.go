package rowlock

import "github.com/sqllock/sqllock/internal/lockkit"

// IsConflict reports whether err, from a statement or the COMMIT of a
// fenced transaction (one that called CheckHeld), means the server rolled
// the whole transaction back because it lost a conflict with another
// transaction: MySQL and MariaDB error 1213, MySQL Group Replication's
// 3101, PostgreSQL 40001 and 40P01.
// Nothing of the transaction was written. Run it again, CheckHeld first,
// while the lock's Err is nil.
//
// On a Galera cluster expect it more often: CheckHeld writes the lock's
// row there, so a fenced transaction that meets a takeover of its lock,
// or a renewal or another fenced transaction of the same hold on another
// node, fails certification with 1213 (docs/galera.md).
func IsConflict(err error) bool { return lockkit.IsTxConflict(err) }
