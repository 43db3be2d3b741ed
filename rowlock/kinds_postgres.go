package rowlock

import (
	"context"
	"strconv"
	"strings"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/pgxrow"
)

// pgKinds is kindsStore on PostgreSQL.
type pgKinds struct{ db pgxrow.DB }

const (
	// pgOwnerHolds: $1 owner_host, $2 owner_id, then the names.
	pgOwnerHolds = `
SELECT name FROM ` + locksTable + `
WHERE owner_host = $1 AND owner_id = $2 AND hold_count > 0 AND expires_at > clock_timestamp()
  AND name IN (%s)`

	// pgDropHolds frees the row at once, MinHold or not: its holder never
	// learned it held it. A waiter of another process that asked for a
	// NOTIFY gets one, as from a release.
	pgDropHolds = `
UPDATE ` + locksTable + `
SET hold_count = 0, expires_at = clock_timestamp()
WHERE name = $1 AND owner_host = $2 AND owner_id = $3 AND hold_count > 0 AND expires_at > clock_timestamp()
RETURNING CASE WHEN wanted THEN pg_notify('` + releaseChannel + `', name) END`
)

// pgRows reads rows for the kinds (see kindRow), by one reading of the
// database clock.
const pgRows = `
SELECT name, expires_at > c.now, hold_count, owner_host, owner_id,
    GREATEST(0, (extract(epoch FROM expires_at - c.now) * 1000000)::bigint),
    CASE WHEN session_token = token THEN session_key ELSE 0 END, token
FROM ` + locksTable + ` CROSS JOIN (SELECT clock_timestamp() AS now) c
WHERE name IN (%s)`

// pgLockRows is pgRows locking the rows for update. In READ COMMITTED a
// row another transaction held is read again once it is granted, in its
// newest version (the clock, read before the wait, only makes a lease
// that lapsed look live for longer, never the other way round).
const pgLockRows = pgRows + ` FOR UPDATE OF ` + locksTable

// pgWriter reads a writer's row, or its stripe's counter when it has none:
// $1 name, $2 stripe.
const pgWriter = `
SELECT COALESCE(l.expires_at > c.now, false), COALESCE(l.hold_count, 0),
    COALESCE(l.owner_host, ''), COALESCE(l.owner_id, ''),
    COALESCE(GREATEST(0, (extract(epoch FROM l.expires_at - c.now) * 1000000)::bigint), 0),
    COALESCE(CASE WHEN l.session_token = l.token THEN l.session_key END, 0),
    COALESCE(l.token, f.token, 0)
FROM (SELECT clock_timestamp() AS now) c
LEFT JOIN ` + locksTable + ` l ON l.name = $1
LEFT JOIN ` + fencesTable + ` f ON f.stripe = $2`

var pgLimitSQL = limitSQL{
	read:          `SELECT permits FROM ` + semaphoresTable + ` WHERE name = $1`,
	readShared:    `SELECT permits FROM ` + semaphoresTable + ` WHERE name = $1 FOR SHARE`,
	readForUpdate: `SELECT permits FROM ` + semaphoresTable + ` WHERE name = $1 FOR UPDATE`,
	insert:        `INSERT INTO ` + semaphoresTable + ` (name, permits, changed_at) VALUES ($1, $2, clock_timestamp())`,
	update:        `UPDATE ` + semaphoresTable + ` SET permits = $1, changed_at = clock_timestamp() WHERE name = $2`,
	countLive: `SELECT expires_at > clock_timestamp() FROM ` + locksTable + `
WHERE name <> $1 AND name IN (%s)
FOR UPDATE`,
	in:   pgPlaceholders,
	scan: `SELECT name, permits FROM ` + semaphoresTable + ` WHERE name > $1 ORDER BY name LIMIT $2`,
	lockIdle: `SELECT permits FROM ` + semaphoresTable + `
WHERE name = $1 AND changed_at < clock_timestamp() - $2::bigint * interval '1 microsecond'
FOR UPDATE SKIP LOCKED`,
	remove: `DELETE FROM ` + semaphoresTable + ` WHERE name = $1`,
}

// pgPlaceholders returns n placeholders numbered from first: "$3, $4".
func pgPlaceholders(first, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(first+i))
	}
	return b.String()
}

// withNames appends names to args, for a statement's IN list.
func withNames(args []any, names []string) []any {
	for _, name := range names {
		args = append(args, name)
	}
	return args
}

func (s pgKinds) ownerHolds(ctx context.Context, names []string, o dblock.Owner) (map[string]bool, error) {
	// Only numbered placeholders are spliced in: names travel as arguments.
	query := strings.Replace(pgOwnerHolds, "%s", pgPlaceholders(3, len(names)), 1)
	return scanNames(s.db.QueryContext(ctx, query, withNames([]any{o.Host, o.ID}, names)...))
}

func (s pgKinds) rows(ctx context.Context, names []string) (map[string]kindRow, error) {
	query := strings.Replace(pgRows, "%s", pgPlaceholders(1, len(names)), 1)
	return scanKindRows(s.db.QueryContext(ctx, query, withNames(nil, names)...))
}

func (s pgKinds) lockRows(ctx context.Context, names []string, nowait bool) (map[string]kindRow, error) {
	query := strings.Replace(pgLockRows, "%s", pgPlaceholders(1, len(names)), 1)
	if nowait {
		query += " NOWAIT"
	}
	return scanKindRows(s.db.QueryContext(ctx, query, withNames(nil, names)...))
}

func (pgKinds) limitSQL() limitSQL { return pgLimitSQL }

func (s pgKinds) writer(ctx context.Context, name string, stripe int64) (kindRow, error) {
	return scanWriter(s.db.QueryRowContext(ctx, pgWriter, name, stripe))
}
