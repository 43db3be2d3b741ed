package rowlock_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

func TestBadInput(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			good := testdb.Name(t)
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
				{"name over 255 bytes", ctx, strings.Repeat("n", 256), nil, dblock.ErrInvalidName},
				{"name not UTF-8", ctx, "job-\xff\xfe", nil, dblock.ErrInvalidName},
				{"name with NUL", ctx, "job\x00", nil, dblock.ErrInvalidName},
				{"zero TTL", ctx, good, []dblock.Option{dblock.TTL(0)}, dblock.ErrInvalidOption},
				{"negative TTL", ctx, good, []dblock.Option{dblock.TTL(-time.Second)}, dblock.ErrInvalidOption},
				{"TTL below minimum", ctx, good, []dblock.Option{dblock.TTL(time.Millisecond)}, dblock.ErrInvalidOption},
				{"negative MinHold", ctx, good, []dblock.Option{dblock.MinHold(-time.Second)}, dblock.ErrInvalidOption},
				{"note too long", ctx, good, []dblock.Option{dblock.Note(strings.Repeat("x", 1025))}, dblock.ErrInvalidOption},
				{"nil option", ctx, good, []dblock.Option{nil}, dblock.ErrInvalidOption},
				{"empty owner id", dblock.WithOwner(ctx, ""), good, nil, dblock.ErrInvalidOption},
				{"canceled context", canceled, good, nil, dblock.ErrNotAcquired},
				{"name that looks like SQL", ctx, "x'; DROP TABLE dblock_locks; --", []dblock.Option{dblock.TTL(-1)}, dblock.ErrInvalidOption},
			}
			for _, c := range cases {
				for _, try := range []struct {
					how string
					fn  func(context.Context, string, ...dblock.Option) (dblock.Lock, error)
				}{{"TryAcquire", l.TryAcquire}, {"Acquire", l.Acquire}} {
					k, err := try.fn(c.ctx, c.lock, c.opts...)
					if !errors.Is(err, c.want) || k != nil {
						t.Errorf("%s: %s = (%v, %v), want %v", c.name, try.how, k, err, c.want)
					}
				}
				// Names the database would reject cannot have been written.
				if lockinput.ValidateName(c.lock) == nil && readRow(t, tg, c.lock).exists {
					t.Errorf("%s: a row was written", c.name)
				}
			}

			// A name that looks like SQL is just a name.
			sqlish := "x'; DROP TABLE dblock_locks; --" + good[:10]
			k, err := l.TryAcquire(ctx, sqlish)
			if err != nil {
				t.Fatalf("SQL-looking name: %v", err)
			}
			if !readRow(t, tg, sqlish).exists {
				t.Fatal("SQL-looking name: no row")
			}
			release(t, k)
		})
	}
}

func TestBadDB(t *testing.T) {
	if _, err := rowlock.New(nil); !errors.Is(err, dblock.ErrInvalidDB) {
		t.Errorf("New(nil) = %v, want ErrInvalidDB", err)
	}
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			if _, err := rowlock.New(tg.DB, rowlock.WithDialect("oracle")); !errors.Is(err, dblock.ErrUnknownDialect) {
				t.Errorf("unknown dialect: %v, want ErrUnknownDialect", err)
			}

			closedDB := testdb.Open(t, tg, tg.DSN)
			l, err := rowlock.New(closedDB)
			if err != nil {
				t.Fatal(err)
			}
			_ = closedDB.Close()
			if _, err := l.TryAcquire(ctx, testdb.Name(t)); !errors.Is(err, dblock.ErrInvalidDB) {
				t.Errorf("closed *sql.DB: %v, want ErrInvalidDB", err)
			}

			closed := newLocker(t, tg.DB)
			_ = closed.Close()
			if _, err := closed.Acquire(ctx, testdb.Name(t)); !errors.Is(err, dblock.ErrClosed) {
				t.Errorf("closed Locker: %v, want ErrClosed", err)
			}

			empty := emptySchemaDB(t, tg)
			el := newLocker(t, empty)
			_, err = el.TryAcquire(ctx, testdb.Name(t))
			if !errors.Is(err, dblock.ErrSchemaMissing) || !strings.Contains(err.Error(), "migrations.Up") {
				t.Errorf("missing tables: %v, want ErrSchemaMissing naming migrations.Up", err)
			}
		})
	}
}

// emptySchemaDB returns a pool whose default schema (PostgreSQL) or database
// (MySQL) or file (SQLite) has no sqllock tables.
func emptySchemaDB(t *testing.T, tg testdb.Target) *sql.DB {
	t.Helper()
	ctx := t.Context()
	switch tg.Dialect {
	case dblock.SQLite:
		empty, _ := testdb.Isolated(t, tg, "sqllock_empty", nil)
		return empty.DB
	case dblock.Postgres:
		if _, err := tg.DB.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS sqllock_empty`); err != nil {
			t.Fatal(err)
		}
		sep := "?"
		if strings.Contains(tg.DSN, "?") {
			sep = "&"
		}
		return testdb.Open(t, tg, tg.DSN+sep+"search_path=sqllock_empty")
	default:
		if _, err := tg.DB.ExecContext(ctx, `CREATE DATABASE IF NOT EXISTS sqllock_empty`); err != nil {
			t.Fatal(err)
		}
		i := strings.LastIndex(tg.DSN, "/")
		rest := tg.DSN[i+1:]
		params := ""
		if j := strings.Index(rest, "?"); j >= 0 {
			params = rest[j:]
		}
		return testdb.Open(t, tg, tg.DSN[:i+1]+"sqllock_empty"+params)
	}
}
