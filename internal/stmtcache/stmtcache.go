// Package stmtcache runs frequent MySQL statements as prepared statements,
// shared by a Locker's calls, and closes them once no call uses them.
package stmtcache

import (
	"context"
	"database/sql"
	"sync"
)

// Cache runs a Locker's frequent MySQL statements as prepared statements.
// go-sql-driver sends a statement with arguments as
// prepare, execute, close unless the DSN has interpolateParams: two round
// trips where one would do, which made an uncontended acquire and release
// cost four. A *sql.Stmt is prepared once per pool connection and kept.
// (PostgreSQL needs none of this: pgx caches prepared statements per
// connection by itself.)
//
// Statements are prepared on first use, so New does no I/O, and closed
// with the Locker once no call is using them; a call after Close (a lock
// held across it is still released and renewed) runs unprepared. It is
// safe for concurrent use.
type Cache struct {
	db *sql.DB

	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	inUse  int
	closed bool
}

// New returns a cache of statements on db. It does no I/O.
func New(db *sql.DB) *Cache {
	return &Cache{db: db, stmts: make(map[string]*sql.Stmt)}
}

// ExecContext runs query prepared, or unprepared when it cannot be.
func (p *Cache) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	stmt, done := p.Stmt(ctx, query)
	defer done()
	if stmt == nil {
		return p.db.ExecContext(ctx, query, args...)
	}
	return stmt.ExecContext(ctx, args...)
}

// QueryRowContext runs query prepared, or unprepared when it cannot be.
// The row holds its statement until scanned; database/sql keeps a closed
// statement's rows readable.
func (p *Cache) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	stmt, done := p.Stmt(ctx, query)
	defer done()
	if stmt == nil {
		return p.db.QueryRowContext(ctx, query, args...)
	}
	return stmt.QueryRowContext(ctx, args...)
}

// Stmt returns query's statement, preparing it if need be, and a func to
// call when done with it; nil after Close, or when preparing failed (the
// unprepared statement then reports the error, for example a missing
// table, in the usual way, and the next call tries again). Preparing takes
// a connection of the pool: a caller holding one in a pool that may have
// no other uses Ready instead.
func (p *Cache) Stmt(ctx context.Context, query string) (*sql.Stmt, func()) {
	stmt, done := p.Ready(query)
	if stmt != nil || p.isClosed() {
		return stmt, done
	}
	p.prepare(ctx, query)
	done()
	return p.Ready(query)
}

// Ready returns query's statement if it has been prepared (by Warm or an
// earlier Stmt), without preparing it, and a func to call when done with
// it. Through Tx.StmtContext, database/sql runs it on the transaction's
// connection, preparing it there if it was prepared on others only: no
// second connection is taken.
func (p *Cache) Ready(query string) (*sql.Stmt, func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, func() {}
	}
	stmt := p.stmts[query]
	if stmt == nil {
		return nil, func() {}
	}
	p.inUse++
	return stmt, p.done
}

// Prepared reports whether every one of queries has been prepared (and
// the cache is open), without I/O.
func (p *Cache) Prepared(queries ...string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, query := range queries {
		if p.closed || p.stmts[query] == nil {
			return false
		}
	}
	return true
}

// Warm prepares those of queries not prepared yet, on a connection of the
// pool, giving up when ctx ends; failures are left to the statements'
// unprepared runs to report.
func (p *Cache) Warm(ctx context.Context, queries ...string) {
	for _, query := range queries {
		if stmt, done := p.Ready(query); stmt != nil || p.isClosed() {
			done()
			continue
		}
		p.prepare(ctx, query)
	}
}

// prepare prepares query outside the lock: a slow server must not hold up
// calls whose statements are ready. Two first calls may both prepare; the
// loser closes its copy.
func (p *Cache) prepare(ctx context.Context, query string) {
	fresh, err := p.db.PrepareContext(ctx, query)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.stmts[query] != nil {
		_ = fresh.Close()
		return
	}
	p.stmts[query] = fresh
}

func (p *Cache) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *Cache) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inUse--
	if p.closed && p.inUse == 0 {
		p.closeAllLocked()
	}
}

// Close closes the statements once no call uses them.
func (p *Cache) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.inUse == 0 {
		p.closeAllLocked()
	}
}

func (p *Cache) closeAllLocked() {
	for query, stmt := range p.stmts {
		_ = stmt.Close()
		delete(p.stmts, query)
	}
}
