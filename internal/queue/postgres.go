package queue

import (
	"context"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/pgxrow"
)

// postgresStore's statements run in a mode that works through poolers.
type postgresStore struct {
	common
	db pgxrow.DB
}

const (
	pgInsert = `
INSERT INTO ` + Table + ` (name, owner_host, owner_id, created_at, expires_at, session_key)
VALUES ($1, $2, $3, clock_timestamp(), clock_timestamp() + $4::bigint * interval '1 microsecond', $5)
RETURNING id`

	// pgBlocker is the oldest live waiter of $1 older than $2 that has a
	// session marker.
	pgBlocker = `
SELECT id, session_key FROM ` + Table + `
WHERE name = $1 AND id < $2 AND expires_at > clock_timestamp() AND session_key <> 0
ORDER BY id LIMIT 1`

	// pgShorten ends waiter $1's place at most $3 µs from now if its
	// session marker is still $2 (its session has ended).
	pgShorten = `
UPDATE ` + Table + `
SET expires_at = LEAST(expires_at, clock_timestamp() + $3::bigint * interval '1 microsecond')
WHERE id = $1 AND session_key = $2`

	pgBeat = `
UPDATE ` + Table + ` SET expires_at = clock_timestamp() + $2::bigint * interval '1 microsecond'
WHERE id = ANY($1) RETURNING id`

	pgRekey = `UPDATE ` + Table + ` SET session_key = $1 WHERE id = $2`
	pgLeave = `DELETE FROM ` + Table + ` WHERE id = $1`

	pgColumns = `
SELECT id, name, owner_host, owner_id,
    (extract(epoch FROM clock_timestamp() - created_at) * 1000000)::bigint,
    (extract(epoch FROM expires_at - clock_timestamp()) * 1000000)::bigint
FROM ` + Table

	pgList = pgColumns + ` WHERE name = $1 AND expires_at > clock_timestamp() ORDER BY id`

	pgListAll = pgColumns + ` WHERE expires_at > clock_timestamp() ORDER BY name, id LIMIT $1`

	pgCountDead = `SELECT count(*) FROM ` + Table + ` WHERE expires_at < clock_timestamp()`

	// pgDeleteDead deletes one batch of dead waiters. The outer condition
	// repeats the inner one: PostgreSQL re-checks it on the newest version
	// of a row a heartbeat updated meanwhile, so a waiter that just renewed
	// is kept. SKIP LOCKED passes over rows a heartbeat is writing right
	// now. Parameters: $1 grace µs, $2 limit.
	pgDeleteDead = `
DELETE FROM ` + Table + `
WHERE id IN (
    SELECT id FROM ` + Table + `
    WHERE expires_at < clock_timestamp() - $1::bigint * interval '1 microsecond'
    ORDER BY id
    LIMIT $2
    FOR UPDATE SKIP LOCKED)
  AND expires_at < clock_timestamp() - $1::bigint * interval '1 microsecond'`
)

func (s postgresStore) insert(ctx context.Context, name string, owner dblock.Owner, ttl time.Duration, key int64) (int64, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, pgInsert, name, owner.Host, owner.ID, ttl.Microseconds(), key).Scan(&id)
	return id, err
}

func (s postgresStore) blocker(ctx context.Context, name string, id int64) (int64, int64, bool, error) {
	return scanBlocker(s.db.QueryRowContext(ctx, pgBlocker, name, id))
}

func (s postgresStore) shorten(ctx context.Context, id, key int64, grace time.Duration) (bool, error) {
	return affectedOne(s.db.ExecContext(ctx, pgShorten, id, key, grace.Microseconds()))
}

func (s postgresStore) beat(ctx context.Context, ids []int64, ttl time.Duration) (map[int64]struct{}, error) {
	rows, err := s.db.QueryContext(ctx, pgBeat, ids, ttl.Microseconds())
	if err != nil {
		return nil, err
	}
	return scanIDs(rows)
}

// pgCommon is the dialect's SQL for common.
var pgCommon = commonSQL{
	leave: pgLeave, list: pgList, listAll: pgListAll, countDead: pgCountDead, deleteDead: pgDeleteDead, rekey: pgRekey,
}
