package rowlock

import (
	"context"
	"database/sql"
	"sync"
)

// prepared runs a Locker's frequent MySQL statements as prepared
// statements. go-sql-driver sends a statement with arguments as
// prepare, execute, close unless the DSN has interpolateParams: two round
// trips where one would do, which made an uncontended acquire and release
// cost four. A *sql.Stmt is prepared once per pool connection and kept.
// (PostgreSQL needs none of this: pgx caches prepared statements per
// connection by itself.)
//
// Statements are prepared on first use, so New does no I/O, and closed
// with the Locker once no call is using them; a call after Close (a lock
// held across it is still released and renewed) runs unprepared.
type prepared struct {
	db *sql.DB

	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	inUse  int
	closed bool
}

func newPrepared(db *sql.DB) *prepared {
	return &prepared{db: db, stmts: make(map[string]*sql.Stmt)}
}

// ExecContext runs query prepared, or unprepared when it cannot be.
func (p *prepared) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	stmt, done := p.stmt(ctx, query)
	defer done()
	if stmt == nil {
		return p.db.ExecContext(ctx, query, args...)
	}
	return stmt.ExecContext(ctx, args...)
}

// QueryRowContext runs query prepared, or unprepared when it cannot be.
// The row holds its statement until scanned; database/sql keeps a closed
// statement's rows readable.
func (p *prepared) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	stmt, done := p.stmt(ctx, query)
	defer done()
	if stmt == nil {
		return p.db.QueryRowContext(ctx, query, args...)
	}
	return stmt.QueryRowContext(ctx, args...)
}

// stmt returns query's statement, preparing it if need be, and a func to
// call when done with it; nil after Close, or when preparing failed (the
// unprepared statement then reports the error, for example a missing
// table, in the usual way, and the next call tries again).
func (p *prepared) stmt(ctx context.Context, query string) (*sql.Stmt, func()) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, func() {}
	}
	p.inUse++
	stmt := p.stmts[query]
	p.mu.Unlock()
	if stmt == nil {
		// Prepared outside the lock: a slow server must not hold up calls
		// whose statements are ready. Two first calls may both prepare;
		// the loser closes its copy.
		fresh, err := p.db.PrepareContext(ctx, query)
		if err == nil {
			p.mu.Lock()
			if stmt = p.stmts[query]; stmt == nil {
				p.stmts[query], stmt = fresh, fresh
			} else {
				defer fresh.Close()
			}
			p.mu.Unlock()
		}
	}
	return stmt, p.done
}

func (p *prepared) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inUse--
	if p.closed && p.inUse == 0 {
		p.closeAllLocked()
	}
}

// Close closes the statements once no call uses them.
func (p *prepared) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.inUse == 0 {
		p.closeAllLocked()
	}
}

func (p *prepared) closeAllLocked() {
	for query, stmt := range p.stmts {
		_ = stmt.Close()
		delete(p.stmts, query)
	}
}
