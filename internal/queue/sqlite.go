package queue

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

// sqliteStore is the queue on SQLite: times are integer µs since the epoch
// by the database clock (see package migrations), each method one
// statement, which SQLite runs alone among writers. There are no session
// markers: key is always 0 and blocker finds none.
type sqliteStore struct {
	common
	db *sql.DB
}

// sqNow is the database clock in µs since the epoch (as in rowlock).
const sqNow = `CAST(unixepoch('subsec') * 1000000 AS INTEGER)`

const (
	sqInsert = `
INSERT INTO ` + Table + ` (name, owner_host, owner_id, created_at, expires_at, session_key)
VALUES (?1, ?2, ?3, ` + sqNow + `, ` + sqNow + ` + ?4, ?5)
RETURNING id`

	sqShorten = `
UPDATE ` + Table + `
SET expires_at = min(expires_at, ` + sqNow + ` + ?1)
WHERE id = ?2 AND session_key = ?3`

	// sqBeat takes the ids' placeholders (%s), from ?2 on.
	sqBeat = `UPDATE ` + Table + ` SET expires_at = ` + sqNow + ` + ?1 WHERE id IN (%s) RETURNING id`

	sqRekey = `UPDATE ` + Table + ` SET session_key = ?1 WHERE id = ?2`
	sqLeave = `DELETE FROM ` + Table + ` WHERE id = ?1`

	sqColumns = `
SELECT id, name, owner_host, owner_id, ` + sqNow + ` - created_at, expires_at - ` + sqNow + `
FROM ` + Table

	sqList    = sqColumns + ` WHERE name = ?1 AND expires_at > ` + sqNow + ` ORDER BY id`
	sqListAll = sqColumns + ` WHERE expires_at > ` + sqNow + ` ORDER BY name, id LIMIT ?1`

	sqCountDead = `SELECT count(*) FROM ` + Table + ` WHERE expires_at < ` + sqNow

	// Parameters: grace µs, limit.
	sqDeleteDead = `
DELETE FROM ` + Table + ` WHERE id IN (
    SELECT id FROM ` + Table + ` WHERE expires_at < ` + sqNow + ` - ?1 ORDER BY id LIMIT ?2)`
)

func (sqliteStore) blocker(context.Context, string, int64) (int64, int64, bool, error) {
	return 0, 0, false, nil
}

func (s sqliteStore) shorten(ctx context.Context, id, key int64, grace time.Duration) (bool, error) {
	return affectedOne(s.db.ExecContext(ctx, sqShorten, grace.Microseconds(), id, key))
}

func (s sqliteStore) insert(ctx context.Context, name string, owner dblock.Owner, ttl time.Duration, key int64) (int64, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, sqInsert, name, owner.Host, owner.ID, ttl.Microseconds(), key).Scan(&id)
	return id, err
}

func (s sqliteStore) beat(ctx context.Context, ids []int64, ttl time.Duration) (map[int64]struct{}, error) {
	args := make([]any, 0, len(ids)+1)
	args = append(args, ttl.Microseconds())
	in := make([]string, len(ids))
	for i, id := range ids {
		args = append(args, id)
		in[i] = fmt.Sprintf("?%d", i+2)
	}
	// Placeholders only: ids are never spliced into the SQL.
	rows, err := s.db.QueryContext(ctx, fmt.Sprintf(sqBeat, strings.Join(in, ", ")), args...)
	if err != nil {
		return nil, err
	}
	return scanIDs(rows)
}

// sqCommon is the dialect's SQL for common.
var sqCommon = commonSQL{
	leave: sqLeave, list: sqList, listAll: sqListAll, countDead: sqCountDead, deleteDead: sqDeleteDead, rekey: sqRekey,
}
