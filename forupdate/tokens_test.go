package forupdate_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/hostile"
	"github.com/sqllock/sqllock/internal/testdb"
)

// tokenSource is a way forupdate draws tokens on a target.
type tokenSource struct {
	name   string
	target testdb.Target
	// locker returns a new Locker drawing tokens this way; all Lockers of
	// one tokenSource share tables.
	locker func(t *testing.T, db *sql.DB) *forupdate.Locker
}

// tokenSources are the ways of every target: the migrated schema's (a
// sequence on PostgreSQL and MariaDB, a table on MySQL 8.0), and on
// MariaDB also MySQL 8.0's counter table, on tables of the test's own.
func tokenSources(t *testing.T) []tokenSource {
	t.Helper()
	var out []tokenSource
	for _, tg := range targets(t) {
		out = append(out, tokenSource{name: tg.Name, target: tg, locker: func(t *testing.T, db *sql.DB) *forupdate.Locker {
			return newLocker(t, db)
		}})
		if !testdb.IsMariaDB(t, tg) {
			continue
		}
		table := counterTables(t, tg)
		out = append(out, tokenSource{name: tg.Name + "/counter_table", target: tg, locker: func(t *testing.T, db *sql.DB) *forupdate.Locker {
			l := newLocker(t, db, forupdate.WithTable(table))
			forupdate.DrawFromCounterTable(l)
			return l
		}})
	}
	return out
}

// counterTables creates a lock table and a counter table shaped as the
// migration makes them on MySQL 8.0, dropped when the test ends, and
// returns the lock table's name.
func counterTables(t testing.TB, tg testdb.Target) string {
	t.Helper()
	ctx := context.Background()
	table := "fu_counter_" + hostile.Random()
	ddl := []string{
		`CREATE TABLE ` + table + ` LIKE ` + forupdate.DefaultTable,
		`CREATE TABLE ` + table + forupdate.CounterSuffix + ` (name VARBINARY(255) NOT NULL PRIMARY KEY,
			token BIGINT NOT NULL AUTO_INCREMENT, KEY (token)) ENGINE=InnoDB`,
	}
	t.Cleanup(func() {
		for _, q := range []string{`DROP TABLE IF EXISTS ` + table, `DROP TABLE IF EXISTS ` + table + forupdate.CounterSuffix} {
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
	return table
}

// TestTokenSources: whichever counter a Locker draws from, tokens grow on
// every acquisition, a rolled-back hold's token is never handed out again,
// NOWAIT reports a held lock, and a waiter's token is drawn once it has the
// lock, not before it waits: larger than every token drawn while it waited
// (here by other names' holders, from the same counter).
func TestTokenSources(t *testing.T) {
	for _, src := range tokenSources(t) {
		t.Run(src.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			tg := src.target
			name := testdb.Name(t)
			l := src.locker(t, tg.DB)

			k1 := acquire(t, ctx, l, name)
			if _, err := src.locker(t, tg.DB).TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("TryAcquire of a held name = %v, want ErrNotAcquired", err)
			}
			if err := k1.Rollback(ctx); err != nil {
				t.Fatalf("Rollback: %v", err)
			}
			k2 := acquire(t, ctx, l, name)
			if k2.Token() <= k1.Token() {
				t.Fatalf("token %d after a rolled-back hold's %d", k2.Token(), k1.Token())
			}

			waiterDB := singleConnDB(t, tg)
			session := sessionID(t, tg, waiterDB)
			got := acquireAsync(ctx, src.locker(t, waiterDB), name)
			waitForState(t, tg, session, "waiting")
			last := k2.Token()
			other := src.locker(t, tg.DB)
			for i := range 3 {
				k := acquire(t, ctx, other, name+"/other")
				if k.Token() <= last {
					t.Fatalf("token %d of another name after %d (draw %d)", k.Token(), last, i)
				}
				last = k.Token()
				release(t, k)
			}
			release(t, k2)
			r := await(t, got)
			if r.err != nil {
				t.Fatalf("waiting Acquire: %v", r.err)
			}
			if r.lock.Token() <= last {
				t.Fatalf("waiter's token %d, not above %d drawn while it waited: drawn before it had the lock", r.lock.Token(), last)
			}
			release(t, r.lock)
		})
	}
}

// TestOutdatedCounter: on MariaDB, a counter that is a table (MySQL 8.0's
// shape, or a development schema from before the sequence) fails Acquire
// with ErrSchemaMissing, which says to run the migrations, and leaves the
// pool as it was.
func TestOutdatedCounter(t *testing.T) {
	ran := false
	for _, tg := range targets(t) {
		if !testdb.IsMariaDB(t, tg) {
			continue
		}
		ran = true
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			db := twoConnDB(t, tg)
			l := newLocker(t, db, forupdate.WithTable(counterTables(t, tg)))
			_, err := l.Acquire(t.Context(), testdb.Name(t))
			if !errors.Is(err, dblock.ErrSchemaMissing) {
				t.Fatalf("Acquire with a counter table on MariaDB = %v, want ErrSchemaMissing", err)
			}
			if n := db.Stats().InUse; n != 0 {
				t.Fatalf("%d connections in use after the failed Acquire", n)
			}
		})
	}
	if !ran && !testdb.LeftOut(t, "mysql") {
		t.Fatal("no MariaDB target: the test needs one (SQLLOCK_MYSQL_DSN)")
	}
}

// TestCloseWaitsForRestores: Release returns before a MySQL session is
// restored; once Close has returned, every connection is back in the pool
// with its own settings.
func TestCloseWaitsForRestores(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := twoConnDB(t, tg)
			l, err := forupdate.New(db)
			if err != nil {
				t.Fatal(err)
			}
			for range 20 {
				release(t, acquire(t, ctx, l, testdb.Name(t)))
			}
			if err := l.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if n := db.Stats().InUse; n != 0 {
				t.Fatalf("%d connections in use after Close", n)
			}
		})
	}
}
