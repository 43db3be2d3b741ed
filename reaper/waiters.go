package reaper

import (
	"context"
	"database/sql"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// A waiter is dead once its heartbeat has lapsed: expires_at is in the past
// by the database clock (here: by more than the grace). Each statement
// deletes one batch of them, oldest first.
const (
	// The outer condition repeats the inner one: PostgreSQL re-checks it on
	// the newest version of a row a heartbeat updated meanwhile, so a waiter
	// that just renewed is kept. SKIP LOCKED passes over rows a heartbeat is
	// writing right now. Parameters: $1 grace µs, $2 limit.
	pgDeleteDeadWaiters = `
DELETE FROM dblock_waiters
WHERE id IN (
    SELECT id FROM dblock_waiters
    WHERE expires_at < clock_timestamp() - $1::bigint * interval '1 microsecond'
    ORDER BY id
    LIMIT $2
    FOR UPDATE SKIP LOCKED)
  AND expires_at < clock_timestamp() - $1::bigint * interval '1 microsecond'`

	// A single-table DELETE reads and locks the newest versions of the rows
	// it deletes. Parameters: grace µs, limit.
	myDeleteDeadWaiters = `
DELETE FROM dblock_waiters
WHERE expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
ORDER BY id
LIMIT ?`
)

func deadWaitersSQL(d dblock.Dialect) string {
	if d == dblock.MySQL {
		return myDeleteDeadWaiters
	}
	return pgDeleteDeadWaiters
}

// deleteDeadWaiters deletes one batch of dead waiters and says how many.
func deleteDeadWaiters(ctx context.Context, db *sql.DB, query string, grace time.Duration, limit int) (int, error) {
	var n int64
	err := lockkit.RetryContention(ctx, func() error {
		res, err := db.ExecContext(ctx, query, grace.Microseconds(), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, lockkit.WrapDBError("reaper: delete dead waiters", err)
	}
	return int(n), nil
}
