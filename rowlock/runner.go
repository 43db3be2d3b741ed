package rowlock

import (
	"context"
	"database/sql"

	"github.com/sqllock/sqllock/internal/pgxrow"
)

// runner runs statements on the Locker's pool the way its store does: on
// PostgreSQL in the pool's exec mode (see package pgxrow: through a
// transaction pooler, never as named prepared statements), as given on
// MySQL.
type runner struct {
	db *sql.DB
	pg *pgxrow.DB // nil on MySQL
}

// runner returns the Locker's runner.
func (l *Locker) runner() runner {
	if ps, ok := l.store.(postgresStore); ok {
		return runner{db: l.db, pg: &ps.db}
	}
	return runner{db: l.db}
}

func (r runner) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if r.pg != nil {
		return r.pg.ExecContext(ctx, query, args...)
	}
	return r.db.ExecContext(ctx, query, args...)
}

func (r runner) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if r.pg != nil {
		return r.pg.QueryContext(ctx, query, args...)
	}
	return r.db.QueryContext(ctx, query, args...)
}

func (r runner) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if r.pg != nil {
		return r.pg.QueryRowContext(ctx, query, args...)
	}
	return r.db.QueryRowContext(ctx, query, args...)
}

// BeginTx begins a transaction on the pool; run its statements through in.
func (r runner) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	return r.db.BeginTx(ctx, opts)
}

// in runs statements in tx the runner's way.
func (r runner) in(tx *sql.Tx) pgxrow.Querier {
	if r.pg != nil {
		return r.pg.On(tx)
	}
	return tx
}
