package admin

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/rowops"
	"github.com/sqllock/sqllock/rowlock"
)

// Admin reads and revokes the locks of one database. It is safe for
// concurrent use.
type Admin struct {
	locker *rowlock.Locker
	ops    rowops.Ops
}

// Option configures an Admin.
type Option func(*config)

type config struct{ dialect dblock.Dialect }

// WithDialect sets the SQL dialect. Default: detected from db's driver, as
// rowlock.New does.
func WithDialect(d dblock.Dialect) Option { return func(c *config) { c.dialect = d } }

// New returns an Admin over db, whose tables must have been created with
// migrations.Up. It does no I/O and never closes db. Errors:
// dblock.ErrInvalidDB, dblock.ErrUnknownDialect, dblock.ErrInvalidOption.
func New(db *sql.DB, opts ...Option) (*Admin, error) {
	var cfg config
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("admin: %w", &dblock.OptionError{Option: "Option", Reason: "nil option"})
		}
		opt(&cfg)
	}
	var lockerOpts []rowlock.Option
	if cfg.dialect != "" {
		lockerOpts = append(lockerOpts, rowlock.WithDialect(cfg.dialect))
	}
	// The Locker is only the way to the lock table's SQL: it takes no lock,
	// so it never opens a session connection.
	l, err := rowlock.New(db, lockerOpts...)
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	ops, _ := rowops.Of(l)
	return &Admin{locker: l, ops: ops}, nil
}

// Close releases what the Admin keeps. It never closes the *sql.DB.
func (a *Admin) Close() error { return a.locker.Close() }

// HeldLock is a lock taken now, by the database clock, as its row says. A
// semaphore or read/write lock has a row per permit, reader or writer
// (see KindOfRow).
type HeldLock struct {
	Name      string
	Token     int64
	OwnerHost string
	OwnerID   string
	// HoldCount is the number of holds of a reentrant owner; 0 for a lock
	// released early that stays taken until its MinHold has passed.
	HoldCount int
	Note      string
	// HeldFor is how long ago the lock was acquired.
	HeldFor time.Duration
	// ExpiresIn is how long its lease lasts unless renewed.
	ExpiresIn time.Duration
}

// Locks lists the locks taken now, by the database clock, in name order:
// at most limit (at least 1) of them. It reads the whole lock table when
// few of its rows are held: it is for people and tools that look, not for
// a hot path.
// Errors: dblock.ErrInvalidOption, dblock.ErrSchemaMissing, or a driver error.
func (a *Admin) Locks(ctx context.Context, limit int) ([]HeldLock, error) {
	rows, err := a.ops.Locks(ctx, limit)
	if err != nil {
		return nil, err
	}
	locks := make([]HeldLock, len(rows))
	for i, r := range rows {
		locks[i] = HeldLock(r)
	}
	return locks, nil
}

// Held returns name's lock and true if it is taken now, by the database
// clock; false when it is free.
// Errors: dblock.ErrInvalidName, dblock.ErrSchemaMissing, or a driver error.
func (a *Admin) Held(ctx context.Context, name string) (HeldLock, bool, error) {
	h, ok, err := a.ops.Held(ctx, name)
	return HeldLock(h), ok, err
}

// Lapsed counts, by the database clock, the lock rows whose lease has
// lapsed (released locks keep their rows) and the fair waiters whose
// heartbeat has: what the reaper would delete now with no grace.
// Errors: dblock.ErrSchemaMissing, or a driver error.
func (a *Admin) Lapsed(ctx context.Context) (locks, waiters int, err error) {
	if locks, err = a.ops.LapsedLocks(ctx); err != nil {
		return 0, 0, err
	}
	if waiters, err = a.ops.Queue().CountDead(ctx); err != nil {
		return 0, 0, err
	}
	return locks, waiters, nil
}

// Revoke ends the lease of the lock row name now, by the database clock,
// whoever holds it: what the database does to a holder that stopped
// renewing, brought forward. It is for operators who must free a lock
// whose holder is alive but stuck (its renewal goes on, its work does
// not), and for tests that check what code does when its lock is lost
// (dblocktest.Harness.Lose): it replaces writing to the lock table by
// hand, which is never supported.
//
// The row is kept, with its fencing token, so the next holder's token is
// larger, as after any takeover. The holder learns of the loss at its next
// renewal or Refresh (Done closes, Err wraps dblock.ErrLockLost); until
// then it may still act, so fence what it writes (CheckHeld): a fenced
// transaction that has proved the hold makes Revoke wait until it ends.
// A lock released early and kept taken by MinHold is freed too.
//
// name is a row's name as Locks lists it: a lock of Acquire, or one row of
// a lock kind (a semaphore's slot, a read/write lock's writer or reader
// row; see KindOfRow), each revoked on its own. It reports whether the
// row was taken (held, or kept by MinHold). Waiters in this process are
// woken, and on PostgreSQL those of others (NOTIFY); elsewhere they find
// the lock free at their next poll.
// Errors: dblock.ErrInvalidName, dblock.ErrClosed,
// dblock.ErrSchemaMissing, or a driver error.
func (a *Admin) Revoke(ctx context.Context, name string) (bool, error) {
	return a.ops.Revoke(ctx, name)
}
