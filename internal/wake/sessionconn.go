package wake

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
	"github.com/sqllock/sqllock/internal/pgxrow"
)

// sessionConn is the session connection as the serving loop uses it.
type sessionConn interface {
	// query runs a one-row query.
	query(ctx context.Context, query string, args []any, dest ...any) error
	// exec runs a statement that returns no rows.
	exec(ctx context.Context, stmt string, args ...any) error
	// wait blocks until an event arrives or ctx ends.
	wait(ctx context.Context) (event, error)
	// notifies reports whether wait can return notifications.
	notifies() bool
}

// event is what wakes the session's goroutine besides its heartbeat.
type event struct {
	kind eventKind
	// channel and payload are a notification's (kind notification).
	channel, payload string
}

// eventKind tells a notification from a ring request.
type eventKind int

const (
	// notification is a PostgreSQL notification that LISTEN receives.
	notification eventKind = iota + 1
	// ringRequest is a request to ring the doorbell (MySQL): a release
	// of this Locker found a waiter of another Locker armed for it
	// (session.ring).
	ringRequest
)

// pgxConn is a session connection through pgx.
type pgxConn struct{ c *pgx.Conn }

func (p pgxConn) query(ctx context.Context, query string, args []any, dest ...any) error {
	// Exec mode: no named prepared statements, which a pooler would leak.
	return p.c.QueryRow(ctx, query, append([]any{pgx.QueryExecModeExec}, args...)...).Scan(dest...)
}

func (p pgxConn) exec(ctx context.Context, stmt string, args ...any) error {
	_, err := p.c.Exec(ctx, stmt, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	return err
}

func (p pgxConn) wait(ctx context.Context) (event, error) {
	n, err := p.c.WaitForNotification(ctx)
	if err != nil {
		return event{}, err
	}
	return event{kind: notification, channel: n.Channel, payload: n.Payload}, nil
}

func (pgxConn) notifies() bool { return true }

// sqlConn is a session connection through database/sql: no notifications;
// its events are the requests to ring the doorbell.
type sqlConn struct {
	c *sql.Conn
	// run runs statements on c that are not prepared (PostgreSQL), with
	// their arguments.
	run   pgxrow.Runner
	rings <-chan struct{}
	// stmts are the statements with arguments, prepared once on the
	// connection (MySQL; nil on PostgreSQL): go-sql-driver would otherwise
	// prepare, run and close each (a ring, on the path of a handoff, would
	// take two round trips).
	stmts map[string]*sql.Stmt
}

// stmt returns query prepared on the connection.
func (s sqlConn) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.stmts[query]; ok {
		return st, nil
	}
	st, err := s.c.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	s.stmts[query] = st
	return st, nil
}

// close closes the prepared statements.
func (s sqlConn) close() {
	for _, st := range s.stmts {
		_ = st.Close()
	}
}

func (s sqlConn) query(ctx context.Context, query string, args []any, dest ...any) error {
	if s.stmts == nil {
		return s.run.QueryRowContext(ctx, query, args...).Scan(dest...)
	}
	if len(args) == 0 {
		return s.c.QueryRowContext(ctx, query).Scan(dest...)
	}
	st, err := s.stmt(ctx, query)
	if err != nil {
		return err
	}
	return st.QueryRowContext(ctx, args...).Scan(dest...)
}

func (s sqlConn) exec(ctx context.Context, query string, args ...any) error {
	if s.stmts == nil {
		_, err := s.run.ExecContext(ctx, query, args...)
		return err
	}
	if len(args) == 0 {
		_, err := s.c.ExecContext(ctx, query)
		return err
	}
	st, err := s.stmt(ctx, query)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(ctx, args...)
	return err
}

func (s sqlConn) wait(ctx context.Context) (event, error) {
	select {
	case <-ctx.Done():
		return event{}, ctx.Err()
	case <-s.rings:
		return event{kind: ringRequest}, nil
	}
}

func (sqlConn) notifies() bool { return false }
