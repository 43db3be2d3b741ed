package dblock

import (
	"context"
	"database/sql"
	"fmt"
)

// Locker hands out named locks.
//
// Errors of every method wrap one of this package's sentinels where one
// applies. ErrNotAcquired means only that another owner holds the lock, or
// that ctx ended while waiting. A server that cannot take locks says why
// instead: ErrUnavailable when it cannot be reached, ErrReadOnly after a
// failover to a standby, ErrSchemaMissing, ErrClosed. Acquire returns
// ErrUnavailable at once rather than waiting for the server to come back.
type Locker interface {
	// Acquire waits until the lock is held or ctx ends. When ctx ends first
	// the error joins ErrNotAcquired and ctx.Err(). If ctx carries an owner
	// that holds the lock already, Acquire re-enters it at once.
	Acquire(ctx context.Context, name string, opts ...Option) (Lock, error)

	// TryAcquire takes the lock if it is free (or already held by the owner
	// in ctx) and returns ErrNotAcquired at once otherwise.
	TryAcquire(ctx context.Context, name string, opts ...Option) (Lock, error)
}

// Lock is one hold of a named lock. It is safe for concurrent use.
type Lock interface {
	// Name is the lock's name.
	Name() string

	// Token is the fencing token: strictly increasing per name across
	// holders, never handed out twice. That holds on one server, and
	// across a PostgreSQL failover, synchronous or not: a PostgreSQL token
	// carries the WAL timeline in its high bits (it is above 2^40), and a
	// promoted standby starts a larger timeline. An asynchronous failover
	// may lose the last tokens handed out; none is handed out again. On
	// MySQL and MariaDB it holds on one server and on Galera, not across a
	// failover to an asynchronous replica. Reentrant holds share the token.
	Token() int64

	// Owner is who holds the lock: the owner Acquire's context carried, or
	// the fresh one made for it. Reentrant holds share the owner.
	Owner() Owner

	// Context carries the holder's owner (so Acquire with it re-enters) and
	// the values of the context Acquire was called with. It is canceled when
	// the lock is released or lost, never by the Acquire context.
	Context() context.Context

	// Done is closed when the lock is released or lost: at once when a
	// renewal or CheckHeld finds it not held, and at the latest at the
	// holder's deadline, by its own monotonic clock, even while a renewal
	// or COMMIT hangs. The deadline is a tenth of the TTL (or of the
	// failover pause, if shorter) before the lease would end, counted from
	// when the last successful renewal was sent. After a PostgreSQL
	// failover that lost that renewal, it passes before anyone can take
	// the lock on the promoted server (the failover pause).
	Done() <-chan struct{}

	// Err is nil while the lock is held; after Done it is ErrReleased or an
	// error wrapping ErrLockLost and the cause (ErrUnavailable among them
	// when the lock's connection to the database failed).
	Err() error

	// Refresh renews the lease now. Returns ErrNotHeld after Release, an
	// error wrapping ErrLockLost when the lock has been lost, and one
	// wrapping ErrUnavailable when the database cannot be reached (the
	// lock may still be held until its lease runs out).
	Refresh(ctx context.Context) error

	// Release gives up this hold. The lock is freed when the last reentrant
	// hold is released (and MinHold has passed). Releasing twice returns
	// ErrNotHeld; releasing a lost lock returns an error wrapping ErrLockLost.
	// An error wrapping ErrUnavailable means the release did not reach the
	// database: the lock ends with its lease (or its connection) unless a
	// later Release gets through.
	Release(ctx context.Context) error
}

// Fencer is implemented by locks whose holder can prove, inside its own
// transaction on the lock's database, that it still holds the lock.
type Fencer interface {
	// CheckHeld fails with an error wrapping ErrLockLost unless the lock is
	// still held by this holder with this token, and keeps it from being
	// taken over until tx ends. Run it in the transaction that writes the
	// data the lock protects, before committing. A refusal also ends the
	// lock (Done closes). After a failover, the promoted server's row
	// decides: a holder whose take or renewals it lost is refused. With
	// asynchronous replication a failover can lose a fenced transaction
	// that committed, together with the lock state it was checked against.
	CheckHeld(ctx context.Context, tx *sql.Tx) error
}

// CheckHeld proves, inside tx, that lock is still held, whatever its kind,
// before writes made in tx commit. A Fencer (rowlock's locks) checks in tx
// and keeps the lock from being taken over until tx ends. A lock that is
// its own transaction (forupdate's, whose Tx returns it) fences what is
// written in that transaction already, since Release commits it with the
// lock and a lost lock's transaction can commit nothing: CheckHeld returns
// its Err when tx is that transaction. Any other lock, or a forupdate lock
// with another transaction, gets an error wrapping ErrCannotFence; a lock
// that is gone, one wrapping ErrLockLost (or ErrReleased).
func CheckHeld(ctx context.Context, lock Lock, tx *sql.Tx) error {
	if lock == nil || tx == nil {
		return fmt.Errorf("dblock: CheckHeld: %w: nil lock or transaction", ErrInvalidOption)
	}
	if f, ok := lock.(Fencer); ok {
		return f.CheckHeld(ctx, tx)
	}
	if t, ok := lock.(interface{ Tx() *sql.Tx }); ok {
		if t.Tx() != tx {
			return fmt.Errorf("%w: %q is held by its own transaction, and writes fenced by it must be made in lock.Tx()", ErrCannotFence, lock.Name())
		}
		return lock.Err()
	}
	return fmt.Errorf("%w: a %T", ErrCannotFence, lock)
}
