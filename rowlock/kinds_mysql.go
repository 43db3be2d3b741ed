package rowlock

import (
	"context"
	"strings"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/pgxrow"
)

// myKinds is kindsStore on MySQL and MariaDB.
type myKinds struct{ db pgxrow.DB }

const (
	// myOwnerHolds: owner_host, owner_id, then the names.
	myOwnerHolds = `
SELECT name FROM ` + locksTable + `
WHERE owner_host = ? AND owner_id = ? AND hold_count > 0 AND expires_at > UTC_TIMESTAMP(6)
  AND name IN (%s)`

	// myDropHolds frees the row at once, MinHold or not (see pgDropHolds).
	// expires_at is assigned before hold_count so it reads the old count.
	myDropHolds = `
UPDATE ` + locksTable + `
SET expires_at = UTC_TIMESTAMP(6), hold_count = 0
WHERE name = ? AND owner_host = ? AND owner_id = ? AND hold_count > 0 AND expires_at > UTC_TIMESTAMP(6)`
)

// myRows reads rows for the kinds (see kindRow); UTC_TIMESTAMP(6) is
// fixed for the statement.
const myRows = `
SELECT name, expires_at > UTC_TIMESTAMP(6), hold_count, owner_host, owner_id,
    GREATEST(0, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)),
    IF(session_token = token, session_key, 0), token
FROM ` + locksTable + `
WHERE name IN (%s)`

// myLockRows is myRows locking the rows for update: a locking read sees
// the newest version of each row once its lock is granted, and
// UTC_TIMESTAMP(6), fixed when the statement started, only makes a lease
// that lapsed look live for longer, never the other way round.
const myLockRows = myRows + ` FOR UPDATE`

// myWriter reads a writer's row, or its stripe's counter when it has none:
// name, stripe.
const myWriter = `
SELECT COALESCE(l.expires_at > c.now, FALSE), COALESCE(l.hold_count, 0),
    COALESCE(l.owner_host, ''), COALESCE(l.owner_id, ''),
    COALESCE(GREATEST(0, TIMESTAMPDIFF(MICROSECOND, c.now, l.expires_at)), 0),
    COALESCE(IF(l.session_token = l.token, l.session_key, 0), 0),
    COALESCE(l.token, f.token, 0)
FROM (SELECT UTC_TIMESTAMP(6) AS now) c
LEFT JOIN ` + locksTable + ` l ON l.name = ?
LEFT JOIN ` + fencesTable + ` f ON f.stripe = ?`

// LOCK IN SHARE MODE rather than FOR SHARE: MariaDB has only the former.
var myLimitSQL = limitSQL{
	read:          `SELECT permits FROM ` + semaphoresTable + ` WHERE name = ?`,
	readShared:    `SELECT permits FROM ` + semaphoresTable + ` WHERE name = ? LOCK IN SHARE MODE`,
	readForUpdate: `SELECT permits FROM ` + semaphoresTable + ` WHERE name = ? FOR UPDATE`,
	insert:        `INSERT INTO ` + semaphoresTable + ` (name, permits, changed_at) VALUES (?, ?, UTC_TIMESTAMP(6))`,
	update:        `UPDATE ` + semaphoresTable + ` SET permits = ?, changed_at = UTC_TIMESTAMP(6) WHERE name = ?`,
	countLive: `SELECT expires_at > UTC_TIMESTAMP(6) FROM ` + locksTable + `
WHERE name <> ? AND name IN (%s)
FOR UPDATE`,
	in:   func(_, n int) string { return placeholders(n) },
	scan: `SELECT name, permits FROM ` + semaphoresTable + ` WHERE name > ? ORDER BY name LIMIT ?`,
	lockIdle: `SELECT permits FROM ` + semaphoresTable + `
WHERE name = ? AND changed_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
FOR UPDATE SKIP LOCKED`,
	remove: `DELETE FROM ` + semaphoresTable + ` WHERE name = ?`,
}

func (s myKinds) rows(ctx context.Context, names []string) (map[string]kindRow, error) {
	query := strings.Replace(myRows, "%s", placeholders(len(names)), 1)
	return scanKindRows(s.db.QueryContext(ctx, query, withNames(nil, names)...))
}

func (s myKinds) lockRows(ctx context.Context, names []string, nowait bool) (map[string]kindRow, error) {
	query := strings.Replace(myLockRows, "%s", placeholders(len(names)), 1)
	if nowait {
		query += " NOWAIT"
	}
	return scanKindRows(s.db.QueryContext(ctx, query, withNames(nil, names)...))
}

func (myKinds) limitSQL() limitSQL { return myLimitSQL }

func (s myKinds) ownerHolds(ctx context.Context, names []string, o dblock.Owner) (map[string]bool, error) {
	// Only placeholders are spliced in: names travel as arguments.
	query := strings.Replace(myOwnerHolds, "%s", placeholders(len(names)), 1)
	return scanNames(s.db.QueryContext(ctx, query, withNames([]any{o.Host, o.ID}, names)...))
}

func (s myKinds) writer(ctx context.Context, name string, stripe int64) (kindRow, error) {
	return scanWriter(s.db.QueryRowContext(ctx, myWriter, name, stripe))
}
