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

// revoke ends the lease of the lock row name now, by the database clock,
// whoever holds it, keeping the row and its token; it reports whether the
// row was taken. Package admin serves it (admin.Admin.Revoke documents
// it); dblocktest's harness for rowlock loses holds with it.
func (l *Locker) revoke(ctx context.Context, name string) (bool, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return false, fmt.Errorf("admin: Revoke: %w", err)
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
		return false, lockkit.WrapDBError(fmt.Sprintf("admin: Revoke %q", name), err)
	}
	if revoked {
		l.waiters.WakeFirst(name)
	}
	return revoked, nil
}

// The statements of revoke: the lease ends now, unless it has already.
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
