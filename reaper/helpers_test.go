package reaper_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/reaper"
	"github.com/sqllock/sqllock/rowlock"
)

func TestMain(m *testing.M) {
	// Every goroutine the reaper starts must be stopped by Stop.
	testdb.Main(m)
}

// isolated returns tg on a schema (PostgreSQL) or database (MySQL) of its
// own, dropped when the test ends, and migrated unless bare. The reaper
// sweeps whole tables: on the shared ones it would delete the released rows
// other packages' tests look at, and their rows would disturb its counts.
func isolated(t *testing.T, tg testdb.Target, bare bool) testdb.Target {
	t.Helper()
	own, _ := testdb.Isolated(t, tg, "sqllock_reaper", nil)
	own.DB.SetMaxOpenConns(30)
	own.DB.SetMaxIdleConns(30)
	if !bare {
		if err := migrations.Up(t.Context(), own.DB); err != nil {
			t.Fatal(err)
		}
	}
	return own
}

// q rewrites ? placeholders as $1, $2, ... for PostgreSQL.
func q(tg testdb.Target, query string) string {
	if tg.Dialect != dblock.Postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// sqliteNow is the database clock on SQLite in µs since the epoch, as
// rowlock reads it.
const sqliteNow = `CAST(unixepoch('subsec') * 1000000 AS INTEGER)`

func newLocker(t testing.TB, db *sql.DB) *rowlock.Locker {
	t.Helper()
	l, err := rowlock.New(db)
	if err != nil {
		t.Fatalf("rowlock.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func newReaper(t testing.TB, l *rowlock.Locker, opts ...reaper.Option) *reaper.Reaper {
	t.Helper()
	r, err := reaper.New(l, opts...)
	if err != nil {
		t.Fatalf("reaper.New: %v", err)
	}
	t.Cleanup(func() { <-r.Stop().Done() })
	return r
}

// seedLapsed inserts n lock rows named prefix1..prefixN (n at most 100000)
// whose leases lapsed lapsedAgo (and up to n µs more) ago, half of them
// still counting a hold, as a crashed holder leaves them. It is one
// statement: generate_series on PostgreSQL, a cross join of digits on MySQL
// (MariaDB's seq_1_to_n is not in MySQL; a recursive CTE hits MySQL's
// depth limit of 1000), a recursive CTE on SQLite.
func seedLapsed(t testing.TB, tg testdb.Target, prefix string, n int, lapsedAgo time.Duration) {
	t.Helper()
	if n < 1 || n > 100000 {
		t.Fatalf("seedLapsed: n = %d, want 1 to 100000", n)
	}
	ago := lapsedAgo.Microseconds()
	var query string
	switch tg.Dialect {
	case dblock.SQLite:
		query = `
WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < ?5)
INSERT INTO dblock_locks
    (name, stripe, token, owner_host, owner_id, hold_count, note, acquired_at, min_hold_until, expires_at)
SELECT ?1 || n, n % 1024, 1, 'reaper-test', 'seed', n % 2, '',
    ` + sqliteNow + ` - (?2 + n) - 3600000000,
    ` + sqliteNow + ` - (?3 + n) - 3600000000,
    ` + sqliteNow + ` - (?4 + n)
FROM seq`
	case dblock.MySQL:
		digits := `(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4
			UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)`
		query = `
INSERT INTO dblock_locks
    (name, stripe, token, owner_host, owner_id, hold_count, note, acquired_at, min_hold_until, expires_at)
SELECT CONCAT(?, seq.n), seq.n % 1024, 1, 'reaper-test', 'seed', seq.n % 2, '',
    UTC_TIMESTAMP(6) - INTERVAL (? + seq.n) MICROSECOND - INTERVAL 1 HOUR,
    UTC_TIMESTAMP(6) - INTERVAL (? + seq.n) MICROSECOND - INTERVAL 1 HOUR,
    UTC_TIMESTAMP(6) - INTERVAL (? + seq.n) MICROSECOND
FROM (SELECT 1 + a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d AS n
      FROM ` + digits + ` a, ` + digits + ` b, ` + digits + ` c, ` + digits + ` e, ` + digits + ` f) seq
WHERE seq.n <= ?`
	default:
		query = `
INSERT INTO dblock_locks
    (name, stripe, token, owner_host, owner_id, hold_count, note, acquired_at, min_hold_until, expires_at)
SELECT ?::text || i::text, i % 1024, 1, 'reaper-test', 'seed', i % 2, '',
    clock_timestamp() - (?::bigint + i) * interval '1 microsecond' - interval '1 hour',
    clock_timestamp() - (?::bigint + i) * interval '1 microsecond' - interval '1 hour',
    clock_timestamp() - (?::bigint + i) * interval '1 microsecond'
FROM generate_series(1, ?::integer) AS i`
	}
	if _, err := tg.DB.ExecContext(t.Context(), q(tg, query), prefix, ago, ago, ago, n); err != nil {
		t.Fatalf("seed %d lapsed rows: %v", n, err)
	}
}

// insertLock inserts one row held by a made-up owner whose lease ends in
// expiresIn (negative: ended that long ago).
func insertLock(t testing.TB, tg testdb.Target, name string, expiresIn time.Duration) {
	t.Helper()
	query := `INSERT INTO dblock_locks
    (name, stripe, token, owner_host, owner_id, hold_count, note, acquired_at, min_hold_until, expires_at)
VALUES (?, 7, 1, 'reaper-test', 'ghost', 1, '', clock_timestamp(), clock_timestamp(),
    clock_timestamp() + ?::bigint * interval '1 microsecond')`
	switch tg.Dialect {
	case dblock.MySQL:
		query = `INSERT INTO dblock_locks
    (name, stripe, token, owner_host, owner_id, hold_count, note, acquired_at, min_hold_until, expires_at)
VALUES (?, 7, 1, 'reaper-test', 'ghost', 1, '', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6),
    UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)`
	case dblock.SQLite:
		query = `INSERT INTO dblock_locks
    (name, stripe, token, owner_host, owner_id, hold_count, note, acquired_at, min_hold_until, expires_at)
VALUES (?, 7, 1, 'reaper-test', 'ghost', 1, '', ` + sqliteNow + `, ` + sqliteNow + `, ` + sqliteNow + ` + ?)`
	}
	if _, err := tg.DB.ExecContext(t.Context(), q(tg, query), name, expiresIn.Microseconds()); err != nil {
		t.Fatalf("insert lock %q: %v", name, err)
	}
}

// insertWaiters inserts n waiters of name whose heartbeats end in expiresIn
// (negative: dead for that long).
func insertWaiters(t testing.TB, tg testdb.Target, name string, n int, expiresIn time.Duration) {
	t.Helper()
	query := `INSERT INTO dblock_waiters (name, owner_host, owner_id, created_at, expires_at)
VALUES (?, 'reaper-test', 'waiter', clock_timestamp(), clock_timestamp() + ?::bigint * interval '1 microsecond')`
	switch tg.Dialect {
	case dblock.MySQL:
		query = `INSERT INTO dblock_waiters (name, owner_host, owner_id, created_at, expires_at)
VALUES (?, 'reaper-test', 'waiter', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)`
	case dblock.SQLite:
		query = `INSERT INTO dblock_waiters (name, owner_host, owner_id, created_at, expires_at)
VALUES (?, 'reaper-test', 'waiter', ` + sqliteNow + `, ` + sqliteNow + ` + ?)`
	}
	for range n {
		if _, err := tg.DB.ExecContext(t.Context(), q(tg, query), name, expiresIn.Microseconds()); err != nil {
			t.Fatalf("insert waiter: %v", err)
		}
	}
}

// count runs a count(*) query.
func count(t testing.TB, tg testdb.Target, query string, args ...any) int {
	t.Helper()
	var n int
	if err := tg.DB.QueryRowContext(context.Background(), q(tg, query), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// rowsWithPrefix counts the lock rows whose names start with prefix.
func rowsWithPrefix(t testing.TB, tg testdb.Target, prefix string) int {
	t.Helper()
	return count(t, tg, `SELECT count(*) FROM dblock_locks WHERE name LIKE ?`, prefix+"%")
}

func lockExists(t testing.TB, tg testdb.Target, name string) bool {
	t.Helper()
	return count(t, tg, `SELECT count(*) FROM dblock_locks WHERE name = ?`, name) == 1
}

func waiters(t testing.TB, tg testdb.Target, name string) int {
	t.Helper()
	return count(t, tg, `SELECT count(*) FROM dblock_waiters WHERE name = ?`, name)
}
