package pgxrow

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// PooledMode is the pgx query exec mode of sqllock's statements on pgx's
// driver when a pooler may be in the path. pgx's default, named prepared
// statements cached per connection, fails through a transaction pooler
// such as PgBouncer 1.18. There a server connection may already have a
// statement of that name, prepared by another client (42P05), or lack one
// this client prepared on another (26000). Given as a call's first
// argument, a mode overrides the DSN's default_query_exec_mode.
//
// It is used only through a pooler: on a direct connection the cached
// statements took a fifth (forupdate) to a third (rowlock) less time for
// an uncontended take and release, whose statements take long to plan
// (BenchmarkExecMode in rowlock and forupdate). The modes that work through a pooler (exec, simple
// protocol, cache describe) measured alike; exec sends the arguments as
// parameters, as the cached statements do, where the simple protocol
// would quote them into the SQL text on the client.
var PooledMode = pgx.QueryExecModeExec

// ForcedMode, when not 0, is the mode of every statement on pgx, pooler
// or not: for the benchmarks comparing modes, which set it while no
// statement runs.
var ForcedMode pgx.QueryExecMode

// Querier runs statements: a *sql.DB, *sql.Conn or *sql.Tx.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Path kinds, as a pool's first connections found them.
const (
	pathUnknown int32 = iota
	pathDirect
	pathPooled
)

// path is what a pool knows about the way to its server: direct or
// through a pooler. Until it knows, its statements run in PooledMode,
// which works either way.
type path struct {
	kind      atomic.Int32
	detecting sync.Mutex // one detection at a time; the others do not wait
}

// args is args with the mode first, when one is needed.
func (p *path) args(args []any) []any {
	switch {
	case p == nil:
		return args // not pgx
	case ForcedMode != 0:
		return append([]any{ForcedMode}, args...)
	case p.kind.Load() == pathDirect:
		return args
	}
	return append([]any{PooledMode}, args...)
}

// begin starts a detection unless the path is known or being found out
// by someone else (who is not waited for); end it with end.
func (p *path) begin() bool {
	if p == nil || p.kind.Load() != pathUnknown || !p.detecting.TryLock() {
		return false
	}
	if p.kind.Load() != pathUnknown {
		p.detecting.Unlock()
		return false
	}
	return true
}

func (p *path) end() { p.detecting.Unlock() }

// look finds out on c whether a pooler is in the path, between begin and
// end. A pooler that multiplexes server connections gives its clients
// cancel keys of its own: the backend PID it sends at login is not the
// PID of the server session the query reaches. A plain TCP proxy passes
// the server's own. When the query fails (the context ended), the next
// statement tries again.
func (p *path) look(ctx context.Context, c *pgx.Conn) {
	var pid uint32
	err := c.QueryRow(ctx, `SELECT pg_backend_pid()`, pgx.QueryExecModeSimpleProtocol).Scan(&pid)
	switch {
	case err != nil:
	case pid == c.PgConn().PID():
		p.kind.Store(pathDirect)
	default:
		p.kind.Store(pathPooled)
	}
}

// Runner runs statements on a Querier, in the mode the pool's path needs.
type Runner struct {
	q Querier
	p *path // nil when the driver is not pgx's
}

var _ Querier = Runner{}

// ExecContext is the Querier's, in the path's mode.
func (r Runner) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return r.q.ExecContext(ctx, query, r.p.args(args)...)
}

// QueryContext is the Querier's, in the path's mode.
func (r Runner) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return r.q.QueryContext(ctx, query, r.p.args(args)...)
}

// QueryRowContext is the Querier's, in the path's mode.
func (r Runner) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return r.q.QueryRowContext(ctx, query, r.p.args(args)...)
}

// DB is a pool whose statements run, when its driver is pgx's
// database/sql driver (jackc/pgx/v5/stdlib), in pgx's default mode on a
// direct connection and in PooledMode through a pooler; its first
// statement finds out which (one more round trip, once). With another
// driver they run as given (lib/pq would take a mode for a parameter).
type DB struct {
	db *sql.DB
	p  *path
}

// Wrap returns db's DB. It does no I/O.
func Wrap(db *sql.DB) DB {
	d := DB{db: db}
	if isPgx(db.Driver()) {
		d.p = new(path)
	}
	return d
}

// On runs statements on q, a connection or transaction of the pool, in
// the pool's mode; it finds out nothing itself (see DetectOn).
func (d DB) On(q Querier) Runner { return Runner{q: q, p: d.p} }

// ExecContext is sql.DB's, in the pool's mode.
func (d DB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	d.detect(ctx)
	return d.On(d.db).ExecContext(ctx, query, args...)
}

// QueryContext is sql.DB's, in the pool's mode.
func (d DB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	d.detect(ctx)
	return d.On(d.db).QueryContext(ctx, query, args...)
}

// QueryRowContext is sql.DB's, in the pool's mode.
func (d DB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	d.detect(ctx)
	return d.On(d.db).QueryRowContext(ctx, query, args...)
}

// Conn takes a connection of the pool (sql.DB.Conn); run its statements
// through On or Scan.
func (d DB) Conn(ctx context.Context) (*sql.Conn, error) { return d.db.Conn(ctx) }

// BeginTx begins a transaction on the pool (sql.DB.BeginTx); run its
// statements through On.
func (d DB) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	return d.db.BeginTx(ctx, opts)
}

// Pooled reports whether the pool's first connections found a pooler in
// the path; known is false until one has looked.
func (d DB) Pooled() (pooled, known bool) {
	if d.p == nil {
		return false, false
	}
	kind := d.p.kind.Load()
	return kind == pathPooled, kind != pathUnknown
}

// detect finds out on a connection of its own whether a pooler is in the
// path, unless that is known or being found out.
func (d DB) detect(ctx context.Context) {
	if !d.p.begin() {
		return
	}
	defer d.p.end()
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return
	}
	defer conn.Close()
	d.lookOn(ctx, conn)
}

// DetectOn finds out on conn, a connection of the pool, whether a pooler
// is in the path, unless that is known or being found out: for a caller
// whose statements run in a transaction (On), which cannot find out by
// itself. With a transaction open on conn, it runs in it.
func (d DB) DetectOn(ctx context.Context, conn *sql.Conn) {
	if !d.p.begin() {
		return
	}
	defer d.p.end()
	d.lookOn(ctx, conn)
}

func (d DB) lookOn(ctx context.Context, conn *sql.Conn) {
	_ = conn.Raw(func(dc any) error {
		if pc, ok := dc.(interface{ Conn() *pgx.Conn }); ok {
			d.p.look(ctx, pc.Conn())
		}
		return nil
	})
}

// isPgx tells pgx's database/sql driver by its package, without importing
// it: importing registers the driver, a side effect sqllock must not have.
func isPgx(drv driver.Driver) bool {
	t := reflect.TypeOf(drv)
	if t == nil {
		return false
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath() == "github.com/jackc/pgx/v5/stdlib"
}
