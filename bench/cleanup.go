package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

// registry remembers every name the run creates rows for, so that exactly
// those rows, and no others, are deleted at the end.
type registry struct {
	mu    sync.Mutex
	locks map[string]struct{} // rows in dblock_locks
	fu    map[string]struct{} // rows in dblock_forupdate (and its MySQL counter)
}

func (r *registry) lock(names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.locks == nil {
		r.locks = map[string]struct{}{}
	}
	for _, n := range names {
		r.locks[n] = struct{}{}
	}
}

func (r *registry) forUpdate(names ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fu == nil {
		r.fu = map[string]struct{}{}
	}
	for _, n := range names {
		r.fu[n] = struct{}{}
	}
}

// take returns and forgets the names registered so far.
func (r *registry) take() (locks, fu []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for n := range r.locks {
		locks = append(locks, n)
	}
	for n := range r.fu {
		fu = append(fu, n)
	}
	r.locks, r.fu = nil, nil
	return locks, fu
}

// cleanup deletes the rows of every registered name. Lock rows go the way
// rowlock's Sweep deletes them: the stripe's token counter is first raised
// to the row's token, so the name's tokens never go backwards.
// Waiter rows left by a failed Leave go too. A database that is down (other
// engineers restart theirs) is waited for, up to ctx's deadline.
func (e *env) cleanup(ctx context.Context) error {
	for {
		err := e.cleanupOnce(ctx)
		if err == nil {
			return nil
		}
		logf("%s: clean-up failed, retrying in 5 s: %v", e.target.name, err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (names start with %q: delete them with -clean %s)", err, e.prefix, e.prefix)
		case <-time.After(5 * time.Second):
		}
	}
}

func (e *env) cleanupOnce(ctx context.Context) error {
	locks, fu := e.names.take()
	var errs []error
	for batch := range slices.Chunk(locks, 1000) {
		if err := e.deleteWaiters(ctx, batch); err != nil {
			errs = append(errs, err)
			e.names.lock(batch...)
			continue
		}
		if err := e.deleteLocks(ctx, batch); err != nil {
			errs = append(errs, err)
			e.names.lock(batch...) // keep them for a later try
		}
	}
	for batch := range slices.Chunk(fu, 1000) {
		if err := e.deleteForUpdate(ctx, batch); err != nil {
			errs = append(errs, err)
			e.names.forUpdate(batch...)
		}
	}
	return errors.Join(errs...)
}

func (e *env) deleteLocks(ctx context.Context, names []string) error {
	if e.dialect == dblock.Postgres {
		_, err := e.db.ExecContext(ctx, `
WITH deleted AS (
    DELETE FROM dblock_locks WHERE name = ANY($1::text[]) RETURNING stripe, token
), fenced AS (
    INSERT INTO dblock_fences AS f (stripe, token)
    SELECT stripe, max(token) FROM deleted GROUP BY stripe
    ON CONFLICT (stripe) DO UPDATE SET token = GREATEST(f.token, EXCLUDED.token)
)
SELECT count(*) FROM deleted`, names)
		return err
	}
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	in, args := inList(names)
	rows, err := tx.QueryContext(ctx, `SELECT stripe, token FROM dblock_locks WHERE name IN (`+in+`) FOR UPDATE`, args...)
	if err != nil {
		return err
	}
	floors := map[int64]int64{}
	for rows.Next() {
		var stripe, token int64
		if err := rows.Scan(&stripe, &token); err != nil {
			_ = rows.Close()
			return err
		}
		floors[stripe] = max(floors[stripe], token)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	if len(floors) > 0 {
		var fenceArgs []any
		for stripe, token := range floors {
			fenceArgs = append(fenceArgs, stripe, token)
		}
		fenceSQL := `INSERT INTO dblock_fences (stripe, token) VALUES ` +
			strings.TrimSuffix(strings.Repeat("(?, ?), ", len(floors)), ", ") +
			` ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token))`
		if _, err := tx.ExecContext(ctx, fenceSQL, fenceArgs...); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM dblock_locks WHERE name IN (`+in+`)`, args...); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// deleteWaiters deletes queue rows of names, left when a waiter could not
// leave (its database went away).
func (e *env) deleteWaiters(ctx context.Context, names []string) error {
	if e.dialect == dblock.Postgres {
		_, err := e.db.ExecContext(ctx, `DELETE FROM dblock_waiters WHERE name = ANY($1::text[])`, names)
		return err
	}
	in, args := inList(names)
	_, err := e.db.ExecContext(ctx, `DELETE FROM dblock_waiters WHERE name IN (`+in+`)`, args...)
	return err
}

// deleteForUpdate deletes forupdate rows (and, on MySQL 8.0, counter rows:
// MariaDB's counter is a sequence, with no rows per name); package
// forupdate documents both as harmless to delete.
func (e *env) deleteForUpdate(ctx context.Context, names []string) error {
	if e.dialect == dblock.Postgres {
		_, err := e.db.ExecContext(ctx, `DELETE FROM dblock_forupdate WHERE name = ANY($1::text[])`, names)
		return err
	}
	in, args := inList(names)
	_, err := e.db.ExecContext(ctx, `DELETE FROM dblock_forupdate WHERE name IN (`+in+`)`, args...)
	if err != nil {
		return err
	}
	var kind string
	err = e.db.QueryRowContext(ctx, `SELECT TABLE_TYPE FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'dblock_forupdate_tokens'`).Scan(&kind)
	switch {
	case errors.Is(err, sql.ErrNoRows) || kind == "SEQUENCE":
		return nil // no counter table: nothing to delete
	case err != nil:
		return err
	}
	_, err = e.db.ExecContext(ctx, `DELETE FROM dblock_forupdate_tokens WHERE name IN (`+in+`)`, args...)
	return err
}

// insertBulk inserts rows held by an owner of their own with a 15-minute
// lease for names, in the shape rowlock writes them. The caller deletes them.
func (e *env) insertBulk(ctx context.Context, names []string, owner string) error {
	if e.dialect == dblock.Postgres {
		for batch := range slices.Chunk(names, 10000) {
			stripes := make([]int32, len(batch))
			for i, n := range batch {
				stripes[i] = stripeOf(n)
			}
			if _, err := e.db.ExecContext(ctx, e.sql.bulkRows, batch, stripes, owner); err != nil {
				return err
			}
		}
		return nil
	}
	for batch := range slices.Chunk(names, 2000) {
		args := make([]any, 0, 3*len(batch))
		for _, n := range batch {
			args = append(args, n, stripeOf(n), owner)
		}
		query := `INSERT INTO dblock_locks
    (name, stripe, token, owner_host, owner_id, hold_count, note, acquired_at, min_hold_until, expires_at) VALUES ` +
			strings.TrimSuffix(strings.Repeat(e.sql.bulkRows+", ", len(batch)), ", ")
		if _, err := e.db.ExecContext(ctx, query, args...); err != nil {
			return err
		}
	}
	return nil
}

func inList(names []string) (string, []any) {
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	return strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", "), args
}

// countRows counts the rows of dblock_locks, everyone's.
func countRows(ctx context.Context, db *sql.DB) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM dblock_locks`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count rows: %w", err)
	}
	return n, nil
}

// cleanPrefix deletes the rows of every name starting with prefix, a
// run's prefix (see runPrefix), from the tables the bench writes.
func (e *env) cleanPrefix(ctx context.Context, prefix string) error {
	if !runPrefix.MatchString(prefix) {
		return fmt.Errorf("%q is not a run's prefix", prefix)
	}
	like := prefix + "%"
	arg := "$1"
	if e.dialect == dblock.MySQL {
		arg = "?"
	}
	found := 0
	for _, q := range []struct {
		table string
		add   func(...string)
	}{
		{"dblock_locks", e.names.lock},
		{"dblock_waiters", e.names.lock},
		{"dblock_forupdate", e.names.forUpdate},
	} {
		rows, err := e.db.QueryContext(ctx, `SELECT DISTINCT name FROM `+q.table+` WHERE name LIKE `+arg, like)
		if err != nil {
			return err
		}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				_ = rows.Close()
				return err
			}
			q.add(name)
			found++
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
	}
	logf("%s: deleting rows of %d names starting with %s", e.target.name, found, prefix)
	return e.cleanup(ctx)
}
