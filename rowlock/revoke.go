package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// Revoke ends the lease of the lock row name now, by the database clock,
// whoever holds it: what the database does to a holder that stopped
// renewing, brought forward. It is for operators who must free a lock
// whose holder is alive but stuck (its renewal goes on, its work does
// not), and for tests that check what code does when its lock is lost
// (dblocktest.Harness.Lose): it replaces writing to the lock table by
// hand, which the package never supports.
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
func (l *Locker) Revoke(ctx context.Context, name string) (bool, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return false, fmt.Errorf("rowlock: Revoke: %w", err)
	}
	// A row's name: the kinds' separator is allowed, to name their rows.
	if err := lockinput.ValidateName(name); err != nil {
		return false, err
	}
	if l.closed.Load() {
		return false, dblock.ErrClosed
	}
	q := myRevoke
	switch l.cfg.dialect {
	case dblock.Postgres:
		q = pgRevoke
	case dblock.SQLite:
		q = sqRevoke
	}
	var revoked bool
	err := lockkit.RetryContentionUntilDone(ctx, func() (err error) {
		if l.cfg.dialect != dblock.Postgres {
			revoked, err = execOne(ctx, l.runner(), q, name)
			return err
		}
		var notified any
		err = l.runner().QueryRowContext(ctx, q, name).Scan(&notified)
		revoked = err == nil
		if errors.Is(err, sql.ErrNoRows) {
			err = nil
		}
		return err
	})
	if err != nil {
		return false, lockkit.WrapDBError(fmt.Sprintf("rowlock: Revoke %q", name), err)
	}
	if revoked {
		busyWaitlists.wakeFirst(name)
	}
	return revoked, nil
}

// The statements of Revoke: the lease ends now, unless it has already.
// The row lock the UPDATE takes waits for a fenced transaction that holds
// the row in shared mode (CheckHeld).
const (
	pgRevoke = `
UPDATE ` + locksTable + ` SET expires_at = clock_timestamp()
WHERE name = $1 AND expires_at > clock_timestamp()
RETURNING pg_notify('` + releaseChannel + `', name)`

	myRevoke = `
UPDATE ` + locksTable + ` SET expires_at = UTC_TIMESTAMP(6)
WHERE name = ? AND expires_at > UTC_TIMESTAMP(6)`

	sqRevoke = `
UPDATE ` + locksTable + ` SET expires_at = ` + sqNow + `
WHERE name = ? AND expires_at > ` + sqNow
)
