package forupdate

import "errors"

// Errors of this package; the others come from dblock.
var (
	// ErrNoConnection is returned by Acquire and TryAcquire when the *sql.DB
	// pool has no free connection within the Locker's connection timeout
	// (WithConnTimeout). Every held or awaited lock keeps one connection:
	// raise SetMaxOpenConns or hold fewer locks at once.
	ErrNoConnection = errors.New("forupdate: no database connection available")

	// ErrRolledBack is returned by Release when the lock's transaction was
	// rolled back instead of committed: the context ended first, an inner
	// reentrant hold called Rollback, or (together with dblock.ErrLockLost)
	// PostgreSQL had aborted it after a failed statement in Tx. The lock is
	// released either way; the work done in Tx is not committed.
	ErrRolledBack = errors.New("forupdate: transaction rolled back")
)
