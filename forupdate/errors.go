package forupdate

import (
	"errors"
	"fmt"
)

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

	// ErrNoRowLocks is returned by New for an SQLite database: this
	// package's lock is a row lock held by an open transaction, and SQLite
	// locks the whole file instead (one writer at a time), so a lock held
	// this way would stop every other lock and every write. Use package
	// rowlock, whose leases work on SQLite. It wraps errors.ErrUnsupported.
	ErrNoRowLocks = fmt.Errorf("forupdate: SQLite has no row locks (SELECT ... FOR UPDATE); use rowlock: %w", errors.ErrUnsupported)

	// ErrMultiPrimary is returned by Acquire and TryAcquire (of every
	// kind) on a node of a Galera cluster (MariaDB Galera, Percona XtraDB
	// Cluster). Row locks there are each node's own, so two nodes would
	// grant the same name at once. And the token sequence has no form that
	// grows across nodes. Use rowlock, whose rows are certified across the
	// cluster, or WithSingleNode when every lock goes to one node. It
	// wraps errors.ErrUnsupported.
	ErrMultiPrimary = fmt.Errorf("forupdate: the server is a node of a Galera cluster, whose row locks are per node; use rowlock, or WithSingleNode if all locks go to one node: %w", errors.ErrUnsupported)
)
