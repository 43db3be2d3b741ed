package queue

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

// store is the SQL of one dialect. Implementations are in postgres.go,
// mysql.go and sqlite.go, with what differs only in its SQL in common;
// each method is one statement, or two that need no transaction.
// Times are judged by the database clock.
type store interface {
	// insert queues a waiter for name at the tail and returns its id; key
	// is its session marker (0 for none).
	insert(ctx context.Context, name string, owner dblock.Owner, ttl time.Duration, key int64) (int64, error)
	// blocker returns the oldest live waiter of name older than id that
	// has a session marker, and its key.
	blocker(ctx context.Context, name string, id int64) (blockerID, key int64, found bool, err error)
	// shorten ends waiter id's place at most grace from now if its
	// session marker is still key.
	shorten(ctx context.Context, id, key int64, grace time.Duration) (bool, error)
	// rekey records key as waiter id's session marker.
	rekey(ctx context.Context, id, key int64) error
	// beat pushes the expiry of the waiters ids to now+ttl and returns
	// those still in the table.
	beat(ctx context.Context, ids []int64, ttl time.Duration) (map[int64]struct{}, error)
	// leave deletes one waiter.
	leave(ctx context.Context, id int64) error
	// list returns name's live waiters in queue order.
	list(ctx context.Context, name string) ([]Waiter, error)
	// listAll returns the live waiters of every name, by name and then in
	// queue order, at most limit of them.
	listAll(ctx context.Context, limit int) ([]Waiter, error)
	// countDead counts the waiters whose heartbeat has lapsed.
	countDead(ctx context.Context) (int, error)
	// deleteDead deletes at most limit waiters whose heartbeat lapsed more
	// than grace ago, oldest first, and says how many. A waiter whose
	// heartbeat is being written at that moment is kept.
	deleteDead(ctx context.Context, grace time.Duration, limit int) (int, error)
}

// runner runs statements: a *sql.DB, or PostgreSQL's pgxrow.DB.
type runner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// commonSQL are a dialect's statements for the store methods that are one
// statement with the same arguments everywhere (see common).
type commonSQL struct {
	// leave: id. list: name. listAll: limit (see queryWaiters). countDead.
	// deleteDead: grace µs, limit. rekey: key, id.
	leave, list, listAll, countDead, deleteDead, rekey string
}

// common is the part of store whose methods differ between dialects only
// in their SQL; each dialect's store embeds it.
type common struct {
	db  runner
	sql commonSQL
}

func (s common) leave(ctx context.Context, id int64) error {
	_, err := s.db.ExecContext(ctx, s.sql.leave, id)
	return err
}

func (s common) list(ctx context.Context, name string) ([]Waiter, error) {
	return queryWaiters(ctx, s.db, s.sql.list, name)
}

func (s common) listAll(ctx context.Context, limit int) ([]Waiter, error) {
	return queryWaiters(ctx, s.db, s.sql.listAll, limit)
}

func (s common) countDead(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, s.sql.countDead).Scan(&n)
	return n, err
}

func (s common) deleteDead(ctx context.Context, grace time.Duration, limit int) (int, error) {
	return affected(s.db.ExecContext(ctx, s.sql.deleteDead, grace.Microseconds(), limit))
}

func (s common) rekey(ctx context.Context, id, key int64) error {
	_, err := s.db.ExecContext(ctx, s.sql.rekey, key, id)
	return err
}

// scanBlocker scans blocker's row.
func scanBlocker(row *sql.Row) (id, key int64, found bool, err error) {
	err = row.Scan(&id, &key)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false, nil
	}
	return id, key, err == nil, err
}

// affectedOne reports whether a statement changed a row.
func affectedOne(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// querier runs the listing queries: the pool.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryWaiters runs a query whose rows are id, name, owner_host, owner_id,
// µs since the waiter enqueued, µs until its heartbeat lapses, ordered by
// name and then id, and numbers each name's waiters from 1.
func queryWaiters(ctx context.Context, db querier, query string, args ...any) ([]Waiter, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	var out []Waiter
	for rows.Next() {
		var w Waiter
		var waitedUs, expiresUs int64
		if err := rows.Scan(&w.ID, &w.Name, &w.OwnerHost, &w.OwnerID, &waitedUs, &expiresUs); err != nil {
			_ = rows.Close()
			return nil, err
		}
		w.Position = 1
		if n := len(out); n > 0 && out[n-1].Name == w.Name {
			w.Position = out[n-1].Position + 1
		}
		w.Waited = time.Duration(waitedUs) * time.Microsecond
		w.ExpiresIn = time.Duration(expiresUs) * time.Microsecond
		out = append(out, w)
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

func scanIDs(rows *sql.Rows) (map[int64]struct{}, error) {
	ids := map[int64]struct{}{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			_ = rows.Close()
			return nil, err
		}
		ids[id] = struct{}{}
	}
	return ids, errors.Join(rows.Err(), rows.Close())
}

// affected is the number of rows a statement changed.
func affected(res sql.Result, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}
