package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/sqllock/sqllock/dblock"
)

// dialectSQL is the raw SQL the library is compared with, per dialect.
type dialectSQL struct {
	// naiveInsert and naiveDelete are the classic lock-table recipe on
	// rowlock's own table: INSERT to acquire, DELETE to release.
	naiveInsert, naiveDelete string
	// naiveTryInsert is the naive recipe's try that does not fail on a
	// taken name (0 rows affected), and naiveReleaseNotify its release that
	// announces itself to LISTENing waiters ($2 is the channel), on
	// PostgreSQL only: the recipe's blocking acquire, as a user would build
	// it without sqllock.
	naiveTryInsert, naiveReleaseNotify string
	// advTry, advLock and advUnlock are the server's own named locks, held
	// by a session: PostgreSQL advisory locks (keyed by a bigint), MySQL
	// GET_LOCK (keyed by the name).
	advTry, advLock, advUnlock string
	// fuCreate makes a name's row in dblock_forupdate; fuLock locks it in
	// the caller's transaction: the recipe package forupdate is built on.
	fuCreate, fuLock string
	// xferGive hands a name's row to a waiter (token + 1), and xferRead
	// reads its owner with a shared row lock, which waits for the giver's
	// commit and then reads the row it committed: the handoff floor's raw protocol (see giveInCommit);
	// xferHold gives the row back to the holder.
	xferGive, xferRead, xferHold string
	// bulkRows inserts the held-names section's rows: a whole statement
	// over arrays on PostgreSQL, one row's VALUES on MySQL (see insertBulk).
	bulkRows string
}

var dialects = map[dblock.Dialect]dialectSQL{
	dblock.Postgres: {
		naiveInsert: `INSERT INTO dblock_locks (name, stripe, token, owner_host, owner_id, acquired_at, min_hold_until, expires_at)
VALUES ($1, 0, 1, 'h', 'o', clock_timestamp(), clock_timestamp(), clock_timestamp() + interval '30 seconds')`,
		naiveDelete: `DELETE FROM dblock_locks WHERE name = $1`,
		naiveTryInsert: `INSERT INTO dblock_locks (name, stripe, token, owner_host, owner_id, acquired_at, min_hold_until, expires_at)
VALUES ($1, 0, 1, 'h', 'o', clock_timestamp(), clock_timestamp(), clock_timestamp() + interval '30 seconds')
ON CONFLICT (name) DO NOTHING`,
		naiveReleaseNotify: `WITH gone AS (DELETE FROM dblock_locks WHERE name = $1 RETURNING name)
SELECT pg_notify($2, name) FROM gone`,
		advTry:    `SELECT pg_try_advisory_lock($1)`,
		advLock:   `SELECT pg_advisory_lock($1)`,
		advUnlock: `SELECT pg_advisory_unlock($1)`,
		fuCreate:  `INSERT INTO dblock_forupdate (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`,
		fuLock:    `SELECT 1 FROM dblock_forupdate WHERE name = $1 FOR UPDATE`,
		xferGive:  `UPDATE dblock_locks SET token = token + 1, owner_id = 'w' WHERE name = $1`,
		xferRead:  `SELECT owner_id FROM dblock_locks WHERE name = $1 FOR SHARE`,
		xferHold:  `UPDATE dblock_locks SET owner_id = 'o' WHERE name = $1`,
		bulkRows: `INSERT INTO dblock_locks
    (name, stripe, token, owner_host, owner_id, hold_count, note, acquired_at, min_hold_until, expires_at)
SELECT n, s, 1, 'sqllock-bench', $3, 1, 'sqllock bench: held names', clock_timestamp(), clock_timestamp(),
    clock_timestamp() + interval '15 minutes'
FROM unnest($1::text[], $2::integer[]) AS t(n, s)`,
	},
	dblock.MySQL: {
		naiveInsert: `INSERT INTO dblock_locks (name, stripe, token, owner_host, owner_id, acquired_at, min_hold_until, expires_at)
VALUES (?, 0, 1, 'h', 'o', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND)`,
		naiveDelete: `DELETE FROM dblock_locks WHERE name = ?`,
		naiveTryInsert: `INSERT IGNORE INTO dblock_locks (name, stripe, token, owner_host, owner_id, acquired_at, min_hold_until, expires_at)
VALUES (?, 0, 1, 'h', 'o', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND)`,
		advTry:    `SELECT GET_LOCK(?, 0)`,
		advLock:   `SELECT GET_LOCK(?, 60)`,
		advUnlock: `SELECT RELEASE_LOCK(?)`,
		fuCreate:  `INSERT IGNORE INTO dblock_forupdate (name) VALUES (?)`,
		fuLock:    `SELECT 1 FROM dblock_forupdate WHERE name = ? FOR UPDATE`,
		xferGive:  `UPDATE dblock_locks SET token = token + 1, owner_id = 'w' WHERE name = ?`,
		xferRead:  `SELECT owner_id FROM dblock_locks WHERE name = ? LOCK IN SHARE MODE`,
		xferHold:  `UPDATE dblock_locks SET owner_id = 'o' WHERE name = ?`,
		bulkRows: `(?, ?, 1, 'sqllock-bench', ?, 1, 'sqllock bench: held names', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6),
    UTC_TIMESTAMP(6) + INTERVAL 15 MINUTE)`,
	},
}

// advKey is the advisory lock key of name: a bigint on PostgreSQL, the
// name itself for MySQL's GET_LOCK.
func (e *env) advKey(name string) any {
	if e.dialect == dblock.MySQL {
		return name
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return int64(h.Sum64())
}

// onConn runs statements on pinned connections prepared, once per
// connection: the server's own locks are a baseline, and go-sql-driver
// would send each statement with arguments as prepare, run and close, two
// round trips where rowlock, which prepares its statements, takes one.
// (pgx prepares and caches by itself.) Safe for concurrent use.
type onConn struct {
	mu    sync.Mutex
	stmts map[connQuery]*sql.Stmt
}

type connQuery struct {
	conn  *sql.Conn
	query string
}

// stmt returns query prepared on conn.
func (o *onConn) stmt(ctx context.Context, conn *sql.Conn, query string) (*sql.Stmt, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := connQuery{conn, query}
	if st, ok := o.stmts[k]; ok {
		return st, nil
	}
	st, err := conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if o.stmts == nil {
		o.stmts = make(map[connQuery]*sql.Stmt)
	}
	o.stmts[k] = st
	return st, nil
}

// queryRow runs query prepared on conn (see onConn).
func (e *env) queryRow(ctx context.Context, conn *sql.Conn, query string, args ...any) *sql.Row {
	st, err := e.prepared.stmt(ctx, conn, query)
	if err != nil {
		return conn.QueryRowContext(ctx, query, args...) // reports the error
	}
	return st.QueryRowContext(ctx, args...)
}

// advTry takes the advisory lock of name on conn without waiting.
func (e *env) advTry(ctx context.Context, conn *sql.Conn, name string) error {
	var ok sql.NullBool
	if err := e.queryRow(ctx, conn, e.sql.advTry, e.advKey(name)).Scan(&ok); err != nil {
		return err
	}
	if !ok.Bool {
		return fmt.Errorf("advisory lock %q: not acquired", name)
	}
	return nil
}

// advLock waits for the advisory lock of name on conn.
func (e *env) advLock(ctx context.Context, conn *sql.Conn, name string) error {
	if e.dialect == dblock.Postgres {
		// pg_advisory_lock returns void.
		_, err := conn.ExecContext(ctx, e.sql.advLock, e.advKey(name))
		return err
	}
	var ok sql.NullBool
	if err := e.queryRow(ctx, conn, e.sql.advLock, e.advKey(name)).Scan(&ok); err != nil {
		return err
	}
	if !ok.Bool {
		return fmt.Errorf("GET_LOCK(%q): timed out", name)
	}
	return nil
}

func (e *env) advUnlock(ctx context.Context, conn *sql.Conn, name string) error {
	var ok sql.NullBool
	if err := e.queryRow(ctx, conn, e.sql.advUnlock, e.advKey(name)).Scan(&ok); err != nil {
		return err
	}
	if !ok.Bool {
		return fmt.Errorf("advisory unlock %q: not held", name)
	}
	return nil
}

// naive runs the classic recipe once: INSERT, then DELETE.
func (e *env) naive(ctx context.Context, name string) error {
	if _, err := e.db.ExecContext(ctx, e.sql.naiveInsert, name); err != nil {
		return err
	}
	_, err := e.db.ExecContext(ctx, e.sql.naiveDelete, name)
	return err
}

// preparedNaive returns the naive recipe with both statements prepared
// once (kept per pool connection by database/sql), and a func that closes
// them.
func (e *env) preparedNaive(ctx context.Context) (func(ctx context.Context, name string) error, func(), error) {
	ins, err := e.db.PrepareContext(ctx, e.sql.naiveInsert)
	if err != nil {
		return nil, nil, err
	}
	del, err := e.db.PrepareContext(ctx, e.sql.naiveDelete)
	if err != nil {
		return nil, nil, errors.Join(err, ins.Close())
	}
	run := func(ctx context.Context, name string) error {
		if _, err := ins.ExecContext(ctx, name); err != nil {
			return err
		}
		_, err := del.ExecContext(ctx, name)
		return err
	}
	return run, func() { _ = ins.Close(); _ = del.Close() }, nil
}

// rawForUpdate runs BEGIN; SELECT ... FOR UPDATE; COMMIT on name's row.
func (e *env) rawForUpdate(ctx context.Context, name string) error {
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	var one int
	if err := tx.QueryRowContext(ctx, e.sql.fuLock, name).Scan(&one); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// preparedRawForUpdate returns rawForUpdate with its SELECT prepared once
// (kept per pool connection by database/sql), and a func that closes it.
func (e *env) preparedRawForUpdate(ctx context.Context) (func(ctx context.Context, name string) error, func(), error) {
	stmt, err := e.db.PrepareContext(ctx, e.sql.fuLock)
	if err != nil {
		return nil, nil, err
	}
	run := func(ctx context.Context, name string) error {
		tx, err := e.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		var one int
		if err := tx.StmtContext(ctx, stmt).QueryRowContext(ctx, name).Scan(&one); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	return run, func() { _ = stmt.Close() }, nil
}

// fuCreate makes name's row in dblock_forupdate, for the raw recipe.
func (e *env) fuCreate(ctx context.Context, name string) error {
	e.names.forUpdate(name)
	_, err := e.db.ExecContext(ctx, e.sql.fuCreate, name)
	return err
}

// stripeOf is rowlock's token counter of a name (FNV-1a 64 mod 1024); rows
// inserted here in rowlock's shape carry it.
func stripeOf(name string) int32 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return int32(h.Sum64() % 1024)
}
