package forupdate_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
)

func TestNewRejectsBadInput(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			cases := []struct {
				name string
				db   *sql.DB
				opts []forupdate.Option
				want error
			}{
				{"nil db", nil, nil, dblock.ErrInvalidDB},
				{"unknown dialect", tg.DB, []forupdate.Option{forupdate.WithDialect("oracle")}, dblock.ErrUnknownDialect},
				{"dialect contradicting the driver", tg.DB, []forupdate.Option{forupdate.WithDialect(map[dblock.Dialect]dblock.Dialect{dblock.Postgres: dblock.MySQL, dblock.MySQL: dblock.Postgres}[tg.Dialect])}, dblock.ErrUnknownDialect},
				{"table with a quote", tg.DB, []forupdate.Option{forupdate.WithTable(`locks"; DROP TABLE x; --`)}, dblock.ErrInvalidOption},
				{"schema-qualified table", tg.DB, []forupdate.Option{forupdate.WithTable("public.locks")}, dblock.ErrInvalidOption},
				{"empty table", tg.DB, []forupdate.Option{forupdate.WithTable("")}, dblock.ErrInvalidOption},
				{"table too long", tg.DB, []forupdate.Option{forupdate.WithTable(strings.Repeat("t", 57))}, dblock.ErrInvalidOption},
				{"nil logger", tg.DB, []forupdate.Option{forupdate.WithLogger(nil)}, dblock.ErrInvalidOption},
				{"zero conn timeout", tg.DB, []forupdate.Option{forupdate.WithConnTimeout(0)}, dblock.ErrInvalidOption},
				{"nil option", tg.DB, []forupdate.Option{nil}, dblock.ErrInvalidOption},
			}
			for _, c := range cases {
				if _, err := forupdate.New(c.db, c.opts...); !errors.Is(err, c.want) {
					t.Errorf("%s: New = %v, want %v", c.name, err, c.want)
				}
			}
			l, err := forupdate.New(tg.DB, forupdate.WithTable(strings.Repeat("t", 56)), forupdate.WithLogger(slog.Default()))
			if err != nil {
				t.Fatalf("New with a 56-byte table name: %v", err)
			}
			if l.Dialect() != tg.Dialect {
				t.Fatalf("dialect %q, want %q", l.Dialect(), tg.Dialect)
			}
		})
	}
}

func TestAcquireRejectsBadInput(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			canceled, cancel := context.WithCancel(ctx)
			cancel()
			cases := []struct {
				name string
				ctx  context.Context
				lock string
				opts []dblock.Option
				want error
			}{
				{"empty name", ctx, "", nil, dblock.ErrInvalidName},
				{"long name", ctx, strings.Repeat("n", dblock.MaxNameLength+1), nil, dblock.ErrInvalidName},
				{"invalid UTF-8", ctx, "bad\xff", nil, dblock.ErrInvalidName},
				{"NUL byte", ctx, "a\x00b", nil, dblock.ErrInvalidName},
				{"nil context", nil, "x", nil, dblock.ErrInvalidOption},
				{"short TTL", ctx, "x", []dblock.Option{dblock.TTL(time.Millisecond)}, dblock.ErrInvalidOption},
				{"Fair", ctx, "x", []dblock.Option{dblock.Fair()}, dblock.ErrInvalidOption},
				{"MinHold", ctx, "x", []dblock.Option{dblock.MinHold(time.Second)}, dblock.ErrInvalidOption},
				{"nil option", ctx, "x", []dblock.Option{nil}, dblock.ErrInvalidOption},
				{"invalid owner", dblock.WithOwner(ctx, ""), "x", nil, dblock.ErrInvalidOption},
				{"canceled context", canceled, "x", nil, dblock.ErrNotAcquired},
			}
			for _, c := range cases {
				for _, try := range []bool{false, true} {
					var err error
					if try {
						_, err = l.TryAcquire(c.ctx, c.lock, c.opts...)
					} else {
						_, err = l.Acquire(c.ctx, c.lock, c.opts...)
					}
					if !errors.Is(err, c.want) {
						t.Errorf("%s (try %v): %v, want %v", c.name, try, err, c.want)
					}
				}
			}
			// Nothing was created for the rejected names.
			var n int
			err := tg.DB.QueryRowContext(ctx, q(tg, `SELECT COUNT(*) FROM `+forupdate.DefaultTable+` WHERE name = $1`), "x").Scan(&n)
			if err != nil || n != 0 {
				t.Fatalf("rows for rejected acquisitions: %d (%v)", n, err)
			}
			// A name of exactly MaxNameLength bytes is fine.
			release(t, acquire(t, ctx, l, testdb.Name(t)+strings.Repeat("é", 20)))
			long := strings.Repeat("m", dblock.MaxNameLength-len(testdb.Name(t))) + testdb.Name(t)
			release(t, acquire(t, ctx, l, long))
		})
	}
}

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
