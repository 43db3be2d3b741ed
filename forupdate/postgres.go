package forupdate

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/pgxrow"
)

// postgres: the server timeout is idle_in_transaction_session_timeout, set
// LOCAL by the locking statement itself (set_config(..., true)), so it costs
// no round trip and ends with the transaction. Tokens come from a sequence:
// nextval is never rolled back. Statements run through pgxrow.DB, so that
// they work through a transaction pooler.
type postgres struct {
	db                           pgxrow.DB
	lockWait, lockTry, insertRow string
	// shareWait and shareTry lock the row FOR SHARE (readers).
	shareWait, shareTry string
	sem                 *semSQL
	// pauseUS is the failover pause in µs (WithFailoverPause).
	pauseUS int64
}

// pgTopLevelAlive tells whether a session still has its top-level
// transaction id: after a failed statement it keeps it when only the
// savepoint the statement ran in was aborted, and loses it, with its row
// locks, when the whole transaction was.
const pgTopLevelAlive = `SELECT backend_xid IS NOT NULL FROM pg_stat_activity WHERE pid = $1`

func newPostgres(db *sql.DB, table, counter string, pause time.Duration) *postgres {
	// The outer SELECT computes nextval only for the row the CTE returns,
	// that is once the row lock is held: a token drawn before winning the
	// lock could be smaller than the one of a holder that won first. The
	// timeline's base (lockkit.PgTimelineBase) keeps tokens drawn after a
	// promotion above those of the old primary: nextval is drawn in the
	// lock's own transaction, which no synchronous standby covers until it
	// commits, so the promoted server's sequence may repeat values.
	lock := func(mode string) string {
		//
		// In the failover pause (see failover.go) it draws no token and
		// returns minus the pause left, in µs.
		return `WITH locked AS (SELECT name FROM ` + table + ` WHERE name = $1 ` + mode + `),
cfg AS (SELECT set_config('idle_in_transaction_session_timeout', $2, true)),
` + pgPauseLeft + `
SELECT CASE WHEN pause.left_us > 0 THEN -pause.left_us
            ELSE ` + lockkit.PgTimelineBase + ` + nextval('` + counter + `') END
FROM locked, cfg, pause`
	}
	return &postgres{
		db:        pgxrow.Wrap(db),
		lockWait:  lock("FOR UPDATE"),
		lockTry:   lock("FOR UPDATE NOWAIT"),
		shareWait: lock("FOR SHARE"),
		shareTry:  lock("FOR SHARE NOWAIT"),
		sem:       pgSemSQL(table, counter, pause.Microseconds()),
		pauseUS:   pause.Microseconds(),
		// DO NOTHING neither raises nor logs a duplicate, and does not wait
		// for a row lock on the existing row.
		insertRow: `INSERT INTO ` + table + ` (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`,
	}
}

func (*postgres) close()                                       {}
func (*postgres) warm(context.Context, time.Duration, request) {}

// queryRow: pgx caches prepared statements per connection by itself.
func (p *postgres) queryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	return p.db.On(tx).QueryRowContext(ctx, query, args...)
}

func (p *postgres) on(q pgxrow.Querier) pgxrow.Querier { return p.db.On(q) }

func (*postgres) openSession(context.Context, *sql.Conn, time.Duration) error { return nil }
func (*postgres) closeSession(context.Context, *sql.Conn) error               { return nil }
func (*postgres) restoresSession() bool                                       { return false }

// READ COMMITTED explicitly: under REPEATABLE READ (a possible server
// default) the UPDATE after a wait fails with a serialization error, and
// the user's statements in Tx would not see the previous holder's work.
func (*postgres) txOptions() *sql.TxOptions {
	return &sql.TxOptions{Isolation: sql.LevelReadCommitted}
}

func (p *postgres) lock(ctx context.Context, c lockCall) (token int64, found, interrupted bool, err error) {
	timeout := pgIdleTimeout(c.ttl)
	query := p.lockTry
	if c.share {
		query = p.shareTry
	}
	var interrupt func(context.Context) error
	if c.wait {
		query = p.lockWait
		if c.share {
			query = p.shareWait
		}
		// pgx answers a canceled context by cutting the connection; a
		// cancel request stops the server's wait and keeps the connection.
		// lib/pq sends one itself.
		if pg := pgConnOf(c.conn); pg != nil {
			interrupt = func(ctx context.Context) error {
				// Not bound to the statement's return, unlike other
				// interrupts. A cancel request once sent must be seen
				// through: pgx waits for the server to have signalled the
				// backend. Otherwise it could reach the server after the
				// statement returned, and cancel the connection's next
				// statement, in this transaction or the next user's.
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interruptTimeout)
				defer cancel()
				return pg.CancelRequest(ctx)
			}
		}
	}
	var restore string
	if c.wait && c.bound > 0 {
		// Set for the waiting statement only: the user's statements in Tx
		// get the session's value back.
		ms := strconv.FormatInt(max(c.bound.Milliseconds(), 1), 10)
		var set string
		if err := p.db.On(c.tx).QueryRowContext(ctx, pgBoundLockWait, ms).Scan(&restore, &set); err != nil {
			return 0, false, ctx.Err() != nil, err
		}
	}
	interrupted, err = runInterruptible(ctx, interrupt, interruptGrace, func(ctx context.Context) error {
		if err := p.queryInTx(ctx, c, &token, query, c.name, timeout, p.pauseUS); err != nil {
			return err
		}
		return p.paused(ctx, token)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, interrupted, nil
	}
	if err == nil && !interrupted && c.wait && c.bound > 0 {
		_, err = p.db.On(c.tx).ExecContext(ctx, pgRestoreLockWait, restore)
	}
	return token, err == nil, interrupted, err
}

// pgBoundLockWait sets the transaction's lock_timeout (milliseconds) and
// returns the value before; pgRestoreLockWait sets it back.
const (
	pgBoundLockWait   = `SELECT current_setting('lock_timeout'), set_config('lock_timeout', $1, true)`
	pgRestoreLockWait = `SELECT set_config('lock_timeout', $1, true)`
)

// queryInTx runs a query that returns one bigint inside c's transaction.
// With a context that can be canceled it runs through pgx on the
// transaction's own connection (the same server transaction) when the
// driver is pgx's (see package pgxrow): database/sql would start a
// goroutine for its row on every acquisition.
func (p *postgres) queryInTx(ctx context.Context, c lockCall, dst *int64, query string, args ...any) error {
	if ctx.Done() != nil {
		if ok, err := p.db.Scan(ctx, c.conn, query, args, dst); ok {
			return err
		}
	}
	p.db.DetectOn(ctx, c.conn)
	return p.db.On(c.tx).QueryRowContext(ctx, query, args...).Scan(dst)
}

func (p *postgres) create(ctx context.Context, conn *sql.Conn, name string) error {
	_, err := p.db.On(conn).ExecContext(ctx, p.insertRow, name)
	return err
}

func (p *postgres) ping(ctx context.Context, dc any) (pingOutcome, error) {
	pg := pgConnOfDriver(dc)
	if pg == nil {
		return pingDriver(ctx, dc)
	}
	switch {
	case pg.IsBusy():
		return pingBusy, nil
	case pg.TxStatus() == 'I':
		return pingTxEnded, nil
	}
	// An empty query: it succeeds in an aborted transaction too, and keeps
	// the session from its idle timeout there as well.
	if err := pg.Ping(ctx); err != nil {
		return pingAlive, err
	}
	if pg.TxStatus() != 'E' {
		return pingAlive, nil
	}
	// A statement failed. Only the server knows whether it aborted a
	// savepoint or the whole transaction; asking takes another connection.
	var alive bool
	if err := p.db.QueryRowContext(ctx, pgTopLevelAlive, pg.PID()).Scan(&alive); err != nil {
		return pingBusy, nil // cannot tell now; the deadline applies
	}
	if !alive {
		return pingTxAborted, nil
	}
	return pingAlive, nil
}

func (*postgres) rolledBack(err error) bool { return errors.Is(err, pgx.ErrTxCommitRollback) }

// pgConnOf returns the pgx connection under conn, nil with other drivers.
func pgConnOf(conn *sql.Conn) (pg *pgconn.PgConn) {
	_ = conn.Raw(func(dc any) error {
		pg = pgConnOfDriver(dc)
		return nil
	})
	return pg
}

func pgConnOfDriver(dc any) *pgconn.PgConn {
	if c, ok := dc.(interface{ Conn() *pgx.Conn }); ok {
		return c.Conn().PgConn()
	}
	return nil
}

func (p *postgres) semSQL() *semSQL { return p.sem }

// semTook: the take drew the token, and lock_timeout was set LOCAL. A
// negative token is the failover pause left: a *pausedError.
func (p *postgres) semTook(ctx context.Context, _ lockCall, token int64) (int64, error) {
	if err := p.paused(ctx, token); err != nil {
		return 0, err
	}
	return token, nil
}

// pgIdleTimeout is the idle_in_transaction_session_timeout of a lock of
// ttl: an int of milliseconds.
func pgIdleTimeout(ttl time.Duration) string {
	return strconv.FormatInt(min(max(ttl.Milliseconds(), 1), math.MaxInt32), 10)
}
