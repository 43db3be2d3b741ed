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
}

// pgTopLevelAlive tells whether a session still has its top-level
// transaction id: after a failed statement it keeps it when only the
// savepoint the statement ran in was aborted, and loses it, with its row
// locks, when the whole transaction was.
const pgTopLevelAlive = `SELECT backend_xid IS NOT NULL FROM pg_stat_activity WHERE pid = $1`

func newPostgres(db *sql.DB, table, counter string) *postgres {
	// The outer SELECT computes nextval only for the row the CTE returns,
	// that is once the row lock is held: a token drawn before winning the
	// lock could be smaller than the one of a holder that won first.
	lock := func(wait string) string {
		return `WITH locked AS (SELECT name FROM ` + table + ` WHERE name = $1 FOR UPDATE` + wait + `),
cfg AS (SELECT set_config('idle_in_transaction_session_timeout', $2, true))
SELECT nextval('` + counter + `') FROM locked, cfg`
	}
	return &postgres{
		db:       pgxrow.Wrap(db),
		lockWait: lock(""),
		lockTry:  lock(" NOWAIT"),
		// DO NOTHING neither raises nor logs a duplicate, and does not wait
		// for a row lock on the existing row.
		insertRow: `INSERT INTO ` + table + ` (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`,
	}
}

func (*postgres) close()                              {}
func (*postgres) warm(context.Context, time.Duration) {}

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
	// The setting is an int of milliseconds.
	timeout := strconv.FormatInt(min(max(c.ttl.Milliseconds(), 1), math.MaxInt32), 10)
	query := p.lockTry
	var interrupt func(context.Context) error
	if c.wait {
		query = p.lockWait
		// pgx answers a canceled context by cutting the connection; a
		// cancel request stops the server's wait and keeps the connection.
		// lib/pq sends one itself.
		if pg := pgConnOf(c.conn); pg != nil {
			interrupt = func(ctx context.Context) error {
				// Not bound to the statement's return, unlike other
				// interrupts: a cancel request once sent must be seen
				// through (pgx waits for the server to have signalled the
				// backend), or it could reach the server after the
				// statement returned and cancel the connection's next
				// statement, in this transaction or the next user's.
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interruptTimeout)
				defer cancel()
				return pg.CancelRequest(ctx)
			}
		}
	}
	interrupted, err = runInterruptible(ctx, interrupt, interruptGrace, func(ctx context.Context) error {
		return p.queryInTx(ctx, c, &token, query, c.name, timeout)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, interrupted, nil
	}
	return token, err == nil, interrupted, err
}

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
