package forupdate_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/hostile"
	"github.com/sqllock/sqllock/internal/testdb"
)

// The standard here is the dblock contract's hostile-input cases
// (internal/hostile), which rowlock runs too: every bad input gets a typed
// error, changes nothing in any forupdate table (lock rows and token
// counter alike), takes no connection for good, and panics nowhere. The
// cases run on tables of their own (created like the migrated ones,
// dropped at the end), so that the whole of each table, and the token
// counter, which every name shares, can be compared before and after.

// hostileTables are the tables one target's cases run on.
type hostileTables struct {
	locks, counter string
	// sequence: the counter is a MariaDB sequence.
	sequence bool
}

// forupdateBackend is the hostile-input environment of forupdate on one
// target: its own tables.
type forupdateBackend struct{ tables hostileTables }

func (b forupdateBackend) LockTable() string { return b.tables.locks }

func (forupdateBackend) Locker(e *hostile.Env, db *sql.DB) dblock.Locker { return locker(e, db) }

// Quiesce waits for the Locker's released connections to be back in the
// pool: MySQL sessions are restored after Release returns.
func (forupdateBackend) Quiesce(e *hostile.Env) {
	if l, ok := e.L.(*forupdate.Locker); ok && l != nil {
		forupdate.WaitRestored(l)
	}
}

// locker returns a Locker on db and the case's tables; opts come after
// the table, so they may name another.
func locker(e *hostile.Env, db *sql.DB, opts ...forupdate.Option) *forupdate.Locker {
	e.T.Helper()
	l, err := forupdate.New(db, append([]forupdate.Option{forupdate.WithTable(e.LockTable())}, opts...)...)
	if err != nil {
		e.T.Fatalf("arrange: forupdate.New: %v", err)
	}
	return l
}

// tableRows reads every row of table, all columns as text, keyed by name.
func tableRows(e *hostile.Env, table string) map[string]string {
	e.T.Helper()
	rows, err := e.Target.DB.QueryContext(context.Background(), `SELECT * FROM `+table)
	if err != nil {
		e.T.Fatalf("snapshot of %s: %v", table, err)
	}
	cols, err := rows.Columns()
	if err != nil {
		e.T.Fatalf("snapshot of %s: %v", table, err)
	}
	out := map[string]string{}
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			e.T.Fatalf("snapshot of %s: %v", table, err)
		}
		var row []string
		var name string
		for i, v := range vals {
			row = append(row, fmt.Sprintf("%s=%q(%v)", cols[i], v.String, v.Valid))
			if cols[i] == "name" {
				name = v.String
			}
		}
		out[name] = strings.Join(row, " ")
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		e.T.Fatalf("snapshot of %s: %v", table, err)
	}
	return out
}

var autoIncrement = regexp.MustCompile(`AUTO_INCREMENT=(\d+)`)

// Snapshot is everything forupdate may write for the case's tables:
// every row of the lock table and (MySQL 8.0's way) of the counter table,
// all columns as text, and where the token counter stands.
func (b forupdateBackend) Snapshot(e *hostile.Env) hostile.Snapshot {
	e.T.Helper()
	ctx := context.Background()
	var s hostile.Snapshot
	s.AddRows(b.tables.locks, tableRows(e, b.tables.locks))
	switch {
	case e.Target.Dialect == dblock.Postgres:
		var last int64
		var called bool
		if err := e.Target.DB.QueryRowContext(ctx, `SELECT last_value, is_called FROM `+b.tables.counter).Scan(&last, &called); err != nil {
			e.T.Fatalf("snapshot of %s: %v", b.tables.counter, err)
		}
		s.AddCounter(b.tables.counter, fmt.Sprintf("last_value %d, is_called %v", last, called))
	case b.tables.sequence:
		// NOCACHE (createHostileTables): the row moves with every draw.
		var next int64
		if err := e.Target.DB.QueryRowContext(ctx, `SELECT next_not_cached_value FROM `+b.tables.counter).Scan(&next); err != nil {
			e.T.Fatalf("snapshot of %s: %v", b.tables.counter, err)
		}
		s.AddCounter(b.tables.counter, fmt.Sprintf("next_not_cached_value %d", next))
	default:
		s.AddRows(b.tables.counter, tableRows(e, b.tables.counter))
		// SHOW CREATE TABLE reads the live counter (information_schema
		// may show a cached one on MySQL 8.0); no AUTO_INCREMENT clause
		// means it has not moved from 1.
		var table, ddl string
		if err := e.Target.DB.QueryRowContext(ctx, `SHOW CREATE TABLE `+b.tables.counter).Scan(&table, &ddl); err != nil {
			e.T.Fatalf("snapshot of %s: %v", b.tables.counter, err)
		}
		counter := "AUTO_INCREMENT=1"
		if m := autoIncrement.FindString(ddl); m != "" {
			counter = m
		}
		s.AddCounter(b.tables.counter, counter)
	}
	return s
}

// createHostileTables makes a lock table and token counter shaped like
// the migrated ones, dropped when the test ends; noCounter leaves the
// counter out.
func createHostileTables(t *testing.T, tg testdb.Target, noCounter bool) hostileTables {
	t.Helper()
	ctx := context.Background()
	tb := hostileTables{locks: "fu_hostile_" + hostile.Random()}
	tb.counter = tb.locks + forupdate.CounterSuffix
	ddl := []string{`CREATE TABLE ` + tb.locks + ` (LIKE ` + forupdate.DefaultTable + ` INCLUDING ALL)`}
	drop := []string{`DROP TABLE IF EXISTS ` + tb.locks}
	if !noCounter {
		ddl = append(ddl, `CREATE SEQUENCE `+tb.counter+` AS bigint`)
		drop = append(drop, `DROP SEQUENCE IF EXISTS `+tb.counter)
	}
	if tg.Dialect == dblock.MySQL {
		ddl = []string{`CREATE TABLE ` + tb.locks + ` LIKE ` + forupdate.DefaultTable}
		tb.sequence = testdb.IsMariaDB(t, tg)
		switch {
		case noCounter:
		case tb.sequence:
			// NOCACHE, so that every draw shows in the sequence's row.
			ddl = append(ddl, `CREATE SEQUENCE `+tb.counter+` NOCACHE`)
			drop = append(drop, `DROP SEQUENCE IF EXISTS `+tb.counter)
		default:
			ddl = append(ddl, `CREATE TABLE `+tb.counter+` LIKE `+forupdate.DefaultTable+forupdate.CounterSuffix)
			drop = append(drop, `DROP TABLE IF EXISTS `+tb.counter)
		}
	}
	t.Cleanup(func() {
		for _, q := range drop {
			if _, err := tg.DB.ExecContext(ctx, q); err != nil {
				t.Errorf("clean-up: %s: %v", q, err)
			}
		}
	})
	for _, q := range ddl {
		if _, err := tg.DB.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return tb
}

// TestHostileInput runs the dblock contract's hostile inputs
// (hostile.ContractCases) and forupdate's own: options it refuses (MinHold,
// Fair), the server timeouts a TTL sets, its tables, and Rollback.
func TestHostileInput(t *testing.T) {
	var nilCtx context.Context // a nil interface, as a caller's bug passes it
	kit := hostile.Kit[forupdate.Option]{
		New: func(e *hostile.Env, db *sql.DB, opts ...forupdate.Option) (dblock.Locker, error) {
			l, err := forupdate.New(db, append([]forupdate.Option{forupdate.WithTable(e.LockTable())}, opts...)...)
			if l == nil {
				return nil, err // not a typed nil inside the interface
			}
			return l, err
		},
		WithDialect:  forupdate.WithDialect,
		WithLogger:   forupdate.WithLogger,
		DefaultTable: forupdate.DefaultTable,
	}
	// serverTimeout reads, in the lock's transaction, the timeout after
	// which the server ends a silent holder's session.
	serverTimeout := func(e *hostile.Env, k dblock.Lock) (int64, error) {
		q := `SELECT setting::bigint FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'`
		if e.Target.Dialect == dblock.MySQL {
			q = `SELECT @@SESSION.wait_timeout`
		}
		var v int64
		err := k.(*forupdate.Lock).Tx().QueryRowContext(e.T.Context(), q).Scan(&v)
		return v, err
	}
	// withTTL acquires a name of the case with ttl and checks the server
	// timeout it sets: want on PostgreSQL (milliseconds), wantMySQL there
	// (seconds).
	withTTL := func(ttl time.Duration, want, wantMySQL int64) hostile.Arrange {
		return func(e *hostile.Env) func(context.Context) error {
			name := e.N("x")
			e.MayWrite(name)
			return func(ctx context.Context) error {
				k, err := e.L.TryAcquire(ctx, name, dblock.TTL(ttl))
				if err != nil {
					return err
				}
				got, err := serverTimeout(e, k)
				expect := want
				if e.Target.Dialect == dblock.MySQL {
					expect = wantMySQL
				}
				if err == nil && got != expect {
					err = fmt.Errorf("with TTL(%v) the server ends a silent holder's session after %d, want %d", ttl, got, expect)
				}
				return errors.Join(err, k.Release(ctx))
			}
		}
	}
	newWith := func(opts ...forupdate.Option) hostile.Arrange { return hostile.NewWith(kit, hostile.SharedDB, opts...) }
	noSuchTable := func(e *hostile.Env) dblock.Locker {
		return locker(e, e.DB, forupdate.WithTable("fu_hostile_no_such_table"))
	}
	noCounter := func(e *hostile.Env) dblock.Locker {
		return locker(e, e.DB, forupdate.WithTable(createHostileTables(e.T, e.Target, true).locks))
	}

	cases := append(hostile.ContractCases(kit), []hostile.Case{
		// Acquisition options.
		{Name: "MinHold positive: the lock ends with its transaction", Want: []error{dblock.ErrInvalidOption},
			Arrange: hostile.Try(hostile.Named("x"), dblock.MinHold(time.Second))},
		{Name: "MinHold positive, Acquire", Want: []error{dblock.ErrInvalidOption},
			Arrange: hostile.Acquire(hostile.Named("x"), dblock.MinHold(time.Nanosecond))},
		{Name: "Fair: the database orders the waiters", Want: []error{dblock.ErrInvalidOption},
			Arrange: hostile.Try(hostile.Named("x"), dblock.Fair())},
		{Name: "Fair, Acquire", Want: []error{dblock.ErrInvalidOption}, Arrange: hostile.Acquire(hostile.Named("x"), dblock.Fair())},
		{Name: "Fair on a held lock, Acquire", Want: []error{dblock.ErrInvalidOption},
			Arrange: hostile.OnHeld(hostile.StillHeld, func(e *hostile.Env, k dblock.Lock, ctx context.Context) error {
				return hostile.Acquire(hostile.Global(k.Name()), dblock.Fair())(e)(ctx)
			})},
		{Name: "nil option among good ones, Acquire", Want: []error{dblock.ErrInvalidOption},
			Arrange: hostile.Acquire(hostile.Named("x"), dblock.TTL(time.Second), nil, dblock.Note("n"))},
		{Name: "a note is accepted and ignored", Arrange: func(e *hostile.Env) func(context.Context) error {
			name := e.N("x")
			e.MayWrite(name)
			return func(ctx context.Context) error {
				k, err := e.L.TryAcquire(ctx, name, dblock.Note("'; DROP TABLE x; --"))
				if err != nil {
					return err
				}
				return k.Release(ctx)
			}
		}},
		// The largest each server takes: PostgreSQL's is an int of
		// milliseconds, MySQL's wait_timeout a year of seconds.
		{Name: "longest TTL is accepted and gives the longest server timeout", Arrange: withTTL(math.MaxInt64, math.MaxInt32, 31536000)},
		{Name: "TTL of a fraction of a second rounds the server timeout up", Arrange: withTTL(1500*time.Millisecond, 1500, 2)},

		// Contexts.
		{Name: "nil context, Rollback", Want: []error{dblock.ErrInvalidOption},
			Arrange: hostile.OnHeld(hostile.StillHeld, func(_ *hostile.Env, k dblock.Lock, _ context.Context) error {
				return k.(*forupdate.Lock).Rollback(nilCtx)
			})},
		{Name: "deadline passes while waiting: no token drawn, nothing left", Want: []error{dblock.ErrNotAcquired, context.DeadlineExceeded},
			Arrange: hostile.OnHeld(hostile.StillHeld, func(e *hostile.Env, k dblock.Lock, ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
				return hostile.GotLock(e.L.Acquire(ctx, k.Name()))
			})},

		// Locker options.
		{Name: "New with a zero connection timeout", Want: []error{dblock.ErrInvalidOption}, Arrange: newWith(forupdate.WithConnTimeout(0))},
		{Name: "New with a negative connection timeout", Want: []error{dblock.ErrInvalidOption},
			Arrange: newWith(forupdate.WithConnTimeout(math.MinInt64))},
		{Name: "table with a quote", Want: []error{dblock.ErrInvalidOption},
			Arrange: newWith(forupdate.WithTable(`locks"; DROP TABLE dblock_forupdate; --`))},
		{Name: "table with a backtick", Want: []error{dblock.ErrInvalidOption},
			Arrange: newWith(forupdate.WithTable("locks`; DROP TABLE dblock_forupdate; --"))},
		{Name: "schema-qualified table", Want: []error{dblock.ErrInvalidOption}, Arrange: newWith(forupdate.WithTable("public.dblock_forupdate"))},
		{Name: "empty table", Want: []error{dblock.ErrInvalidOption}, Arrange: newWith(forupdate.WithTable(""))},
		{Name: "table starting with a digit", Want: []error{dblock.ErrInvalidOption}, Arrange: newWith(forupdate.WithTable("1locks"))},
		{Name: "table not ASCII", Want: []error{dblock.ErrInvalidOption}, Arrange: newWith(forupdate.WithTable("lócks"))},
		{Name: "table of 57 bytes", Want: []error{dblock.ErrInvalidOption}, Arrange: newWith(forupdate.WithTable(strings.Repeat("t", 57)))},
		{Name: "table of 10 MB", Want: []error{dblock.ErrInvalidOption}, Arrange: newWith(forupdate.WithTable(hostile.TenMB()))},
		{Name: "table of 56 bytes is a name, missing here", Want: []error{dblock.ErrSchemaMissing}, Msg: "migrations.Up",
			Arrange: newWith(forupdate.WithTable(strings.Repeat("t", 56)))},

		// Missing tables.
		{Name: "missing table, TryAcquire", Want: []error{dblock.ErrSchemaMissing}, Msg: "migrations.Up",
			Arrange: hostile.WithLocker(noSuchTable, hostile.TryOn)},
		{Name: "missing table, Acquire", Want: []error{dblock.ErrSchemaMissing}, Msg: "migrations.Up",
			Arrange: hostile.WithLocker(noSuchTable, hostile.AcquireOn())},
		{Name: "missing token counter, Acquire", Want: []error{dblock.ErrSchemaMissing}, Msg: "migrations.Up",
			Arrange: hostile.WithLocker(noCounter, hostile.AcquireOn())},

		// Lock handles.
		{Name: "Rollback after Release", Want: []error{dblock.ErrNotHeld},
			Arrange: hostile.OnHeld(hostile.Released, func(_ *hostile.Env, k dblock.Lock, ctx context.Context) error {
				return k.(*forupdate.Lock).Rollback(ctx)
			})},
	}...)

	hostile.Run(t, targets(t), func(t *testing.T, tg testdb.Target) hostile.Backend {
		return forupdateBackend{tables: createHostileTables(t, tg, false)}
	}, cases)
}

// TestMissingTableAndClosedDB: on a pool of one connection, a refused
// acquisition gives the connection back, usable.
func TestMissingTableAndClosedDB(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := singleConnDB(t, tg)
			l := newLocker(t, db, forupdate.WithTable("forupdate_no_such_table"))
			for _, try := range []bool{false, true} {
				var err error
				if try {
					_, err = l.TryAcquire(ctx, testdb.Name(t))
				} else {
					_, err = l.Acquire(ctx, testdb.Name(t))
				}
				if !errors.Is(err, dblock.ErrSchemaMissing) {
					t.Fatalf("missing table (try %v): %v, want ErrSchemaMissing", try, err)
				}
			}
			// The connection went back to the pool (of one): it is usable.
			if err := db.PingContext(ctx); err != nil {
				t.Fatal(err)
			}

			closed := testdb.Open(t, tg, tg.DSN)
			lc := newLocker(t, closed)
			_ = closed.Close()
			if _, err := lc.Acquire(ctx, testdb.Name(t)); !errors.Is(err, dblock.ErrInvalidDB) {
				t.Fatalf("closed *sql.DB: %v, want ErrInvalidDB", err)
			}
		})
	}
}
