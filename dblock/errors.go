package dblock

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test for them with errors.Is: errors returned by sqllock
// wrap them, often together with the cause (a context error, a driver error).
var (
	// ErrNotAcquired is returned by TryAcquire when another owner holds the
	// lock, and by Acquire when its context ends first; in that case the
	// context's error is joined to it.
	ErrNotAcquired = errors.New("dblock: not acquired")

	// ErrNotHeld is returned by Release and Refresh on a lock that this
	// handle no longer holds: released already, or never held.
	ErrNotHeld = errors.New("dblock: not held")

	// ErrReleased is what Lock.Err returns after the holder released the lock.
	ErrReleased = errors.New("dblock: released")

	// ErrLockLost means the lock was taken from the holder or could not be
	// renewed in time: the lease may have expired and someone else may hold
	// it now. Lock.Err wraps it together with the cause.
	ErrLockLost = errors.New("dblock: lock lost")

	// ErrInvalidName is returned for an empty name, a name longer than
	// MaxNameLength bytes, or a name that is not valid UTF-8.
	ErrInvalidName = errors.New("dblock: invalid lock name")

	// ErrInvalidOption is returned for a non-positive TTL, a negative
	// MinHold, an over-long note or another option out of range.
	ErrInvalidOption = errors.New("dblock: invalid option")

	// ErrInvalidDB is returned by constructors given a nil *sql.DB, and by
	// operations on a *sql.DB that has been closed.
	ErrInvalidDB = errors.New("dblock: invalid database handle")

	// ErrUnknownDialect is returned when the SQL dialect cannot be told from
	// the driver and was not given with an option.
	ErrUnknownDialect = errors.New("dblock: unknown SQL dialect")

	// ErrSchemaMissing is returned when the lock tables do not exist, or
	// are older than this version of sqllock expects: run migrations.Up (or
	// `sqllock migrate up`) first.
	ErrSchemaMissing = errors.New("dblock: lock tables missing or outdated: run migrations.Up (or `sqllock migrate up`) first")

	// ErrReadOnly means the database refused a write because it is
	// read-only: a PostgreSQL hot standby or default_transaction_read_only,
	// a MySQL/MariaDB server or transaction in read-only mode. After a
	// failover, the pool is talking to the old primary turned standby, or to
	// a replica. It is never reported as ErrNotAcquired: a job that is "not
	// acquired" would silently never run again. A holder whose renewals fail
	// this way keeps retrying until its deadline (the pool may reconnect to
	// the new primary), then loses the lock with this error as the cause.
	ErrReadOnly = errors.New("dblock: the database is read-only (a standby or replica, or read-only mode): locks cannot be taken, renewed or released there")

	// ErrUnavailable means the database could not be reached or ended the
	// connection: refused, not resolved, timed out while connecting, cut
	// mid-statement, shutting down or starting up, out of connections; for
	// SQLite, a file that cannot be opened. It may work again later
	// (`sqllock` exits 69 on it). The driver's error stays in the chain for
	// errors.As. Acquire, TryAcquire, Refresh and Release of sqllock's
	// Lockers and locks return it (Acquire at once, without waiting for the
	// server to come back), as do their listing methods and migrations.Up,
	// Down and Version; Lock.Err wraps it next to ErrLockLost when a lock
	// was lost because its connection failed. It is never ErrNotAcquired,
	// and the end of the caller's own context is not it: an acquisition
	// cut short by ctx returns ErrNotAcquired joined with ctx.Err().
	ErrUnavailable = errors.New("dblock: database unavailable")

	// ErrCannotFence is returned by CheckHeld for a lock that cannot prove
	// in the given transaction that it is held: neither a Fencer nor a lock
	// whose own transaction that is.
	ErrCannotFence = errors.New("dblock: this lock cannot fence writes made in that transaction")

	// ErrClosed is returned by a Locker after Close.
	ErrClosed = errors.New("dblock: locker closed")
	// ErrLimitMismatch is returned when a semaphore is acquired with
	// another limit than the one its holders use now: the limit of a name
	// changes only while no one else holds a permit of it, never silently
	// under them.
	ErrLimitMismatch = errors.New("dblock: semaphore limit differs from the one its holders use")
	// ErrUpgrade is returned when an owner that holds the read lock of a
	// name asks for its write lock: the writer would wait for its own
	// reader forever. Release the read lock first.
	ErrUpgrade = errors.New("dblock: read lock held: it cannot be upgraded to the write lock")
)

// NameError reports a lock name that cannot be used, and why.
type NameError struct {
	Name   string
	Reason string
}

func (e *NameError) Error() string {
	name := e.Name
	if len(name) > 40 {
		name = name[:40] + "..."
	}
	return fmt.Sprintf("dblock: invalid lock name %q: %s", name, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidName) true.
func (e *NameError) Unwrap() error { return ErrInvalidName }

// OptionError reports an option value out of range.
type OptionError struct {
	Option string
	Reason string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("dblock: invalid option %s: %s", e.Option, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidOption) true.
func (e *OptionError) Unwrap() error { return ErrInvalidOption }
