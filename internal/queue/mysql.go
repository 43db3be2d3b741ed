package queue

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

type mysqlStore struct {
	common
	db *sql.DB
}

const (
	myInsert = `
INSERT INTO ` + Table + ` (name, owner_host, owner_id, created_at, expires_at, session_key)
VALUES (?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?)`

	// mySetQueued tells rowlock's takes of name to look at the queue.
	mySetQueued = `UPDATE ` + locksTable + ` SET queued = TRUE WHERE name = ?`

	// myBlocker: see pgBlocker. Parameters: name, id.
	myBlocker = `
SELECT id, session_key FROM ` + Table + ` FORCE INDEX (dblock_waiters_name_id)
WHERE name = ? AND id < ? AND expires_at > UTC_TIMESTAMP(6) AND session_key <> 0
ORDER BY id LIMIT 1`

	// myShorten: see pgShorten. Parameters: grace µs, id, key.
	myShorten = `
UPDATE ` + Table + `
SET expires_at = LEAST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
WHERE id = ? AND session_key = ?`

	// myBeat and myAlive take the ids' placeholders (%s); MySQL has no
	// RETURNING to tell which rows the UPDATE found.
	myBeat  = `UPDATE ` + Table + ` SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE id IN (%s)`
	myAlive = `SELECT id FROM ` + Table + ` WHERE id IN (%s)`

	myRekey = `UPDATE ` + Table + ` SET session_key = ? WHERE id = ?`
	myLeave = `DELETE FROM ` + Table + ` WHERE id = ?`

	myColumns = `
SELECT id, name, owner_host, owner_id,
    TIMESTAMPDIFF(MICROSECOND, created_at, UTC_TIMESTAMP(6)),
    TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM ` + Table

	myList = myColumns + ` WHERE name = ? AND expires_at > UTC_TIMESTAMP(6) ORDER BY id`

	myListAll = myColumns + ` WHERE expires_at > UTC_TIMESTAMP(6) ORDER BY name, id LIMIT ?`

	myCountDead = `SELECT count(*) FROM ` + Table + ` WHERE expires_at < UTC_TIMESTAMP(6)`

	// myDeleteDead deletes one batch of dead waiters. A single-table DELETE
	// reads and locks the newest versions of the rows it deletes.
	// Parameters: grace µs, limit.
	myDeleteDead = `
DELETE FROM ` + Table + `
WHERE expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND
ORDER BY id
LIMIT ?`
)

func (s mysqlStore) blocker(ctx context.Context, name string, id int64) (int64, int64, bool, error) {
	return scanBlocker(s.db.QueryRowContext(ctx, myBlocker, name, id))
}

func (s mysqlStore) shorten(ctx context.Context, id, key int64, grace time.Duration) (bool, error) {
	return affectedOne(s.db.ExecContext(ctx, myShorten, grace.Microseconds(), id, key))
}

// insert queues a waiter in a transaction that first sets queued on the
// name's lock row (if it has one), holding that row's lock until the
// waiter's row is committed: rowlock's myTakeFast passes over the queue only
// while queued is false. Repeatable read, whatever the pool's default, so
// that a name without a lock row has its gap locked too, and a lock row
// created meanwhile (queued, as rows are created) cannot be taken over and
// cleared before this waiter's row shows.
func (s mysqlStore) insert(ctx context.Context, name string, owner dblock.Owner, ttl time.Duration, key int64) (id int64, err error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, mySetQueued, name); err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, myInsert, name, owner.Host, owner.ID, ttl.Microseconds(), key)
	if err != nil {
		return 0, err
	}
	if id, err = res.LastInsertId(); err != nil {
		return 0, err
	}
	return id, tx.Commit()
}

func (s mysqlStore) beat(ctx context.Context, ids []int64, ttl time.Duration) (map[int64]struct{}, error) {
	args := make([]any, 0, len(ids)+1)
	args = append(args, ttl.Microseconds())
	for _, id := range ids {
		args = append(args, id)
	}
	// Placeholders only: ids are never spliced into the SQL.
	in := strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf(myBeat, in), args...); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, fmt.Sprintf(myAlive, in), args[1:]...)
	if err != nil {
		return nil, err
	}
	return scanIDs(rows)
}

// myCommon is the dialect's SQL for common.
var myCommon = commonSQL{
	leave: myLeave, list: myList, listAll: myListAll, countDead: myCountDead, deleteDead: myDeleteDead, rekey: myRekey,
}
