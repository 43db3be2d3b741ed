package testdb

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	_ "github.com/lib/pq" // driver "postgres"

	"github.com/sqllock/sqllock/dblock"
)

// The drivers sqllock accepts, as DriverTargets names them: the name of
// the Target and of its t.Run.
const (
	DriverPgx     = "postgres-pgx"     // jackc/pgx/v5/stdlib, sql.Open("pgx", …)
	DriverPgxPool = "postgres-pgxpool" // a pgxpool.Pool through stdlib.OpenDBFromPool
	DriverPq      = "postgres-pq"      // lib/pq, sql.Open("postgres", …)
	DriverMySQL   = "mysql"            // go-sql-driver/mysql
	DriverSQLite  = SQLiteName         // modernc.org/sqlite
)

// DriverTargets returns one Target per database/sql driver sqllock
// accepts, over the databases of AllTargets: for PostgreSQL, pgx's
// driver, a pgxpool.Pool through stdlib.OpenDBFromPool, and lib/pq; for
// MySQL go-sql-driver; for SQLite modernc. Each Target's Name is one of
// the Driver constants. The pools other than Targets' own are opened for
// t, migrated already through Targets, and closed when t ends. A child
// process (see Child) reaches the same one with DriverTarget, given
// ChildEnv.
func DriverTargets(t testing.TB) []Target {
	t.Helper()
	var out []Target
	for _, tg := range AllTargets(t) {
		switch tg.Dialect {
		case dblock.Postgres:
			pgx := tg
			pgx.Name = DriverPgx
			out = append(out, pgx, openPgxPool(t, tg), openPq(t, tg))
		case dblock.MySQL:
			tg.Name = DriverMySQL
			out = append(out, tg)
		default:
			out = append(out, tg)
		}
	}
	return out
}

// DriverTarget returns DriverTargets' target named name; in a child
// process, the SQLite one is the parent's file (see ChildEnv).
func DriverTarget(t testing.TB, name string) Target {
	t.Helper()
	for _, tg := range DriverTargets(t) {
		if tg.Name == name {
			return tg
		}
	}
	t.Fatalf("testdb: no driver target %q (left out by %s=%s?)", name, dialectsEnv, os.Getenv(dialectsEnv))
	return Target{}
}

// openPgxPool opens tg's database through a pgxpool.Pool, as applications
// that use pgx natively hand sqllock a *sql.DB.
func openPgxPool(t testing.TB, tg Target) Target {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(tg.DSN)
	if err != nil {
		t.Fatalf("testdb: pgxpool: %v", err)
	}
	// pgxpool's default (4, or the number of CPUs) is below what the
	// tests' session connections, waiters and holders use at once; the
	// *sql.DB over it cannot tell (its MaxOpenConns is 0).
	cfg.MaxConns = sharedMaxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("testdb: pgxpool: %v", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() {
		_ = db.Close()
		pool.Close() // waits for its connections to close
	})
	tg.Name, tg.DB = DriverPgxPool, db
	return tg
}

// openPq opens tg's database with lib/pq.
func openPq(t testing.TB, tg Target) Target {
	t.Helper()
	dsn := pqDSN(tg.DSN)
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatalf("testdb: lib/pq: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	tg.Name, tg.DriverName, tg.DSN, tg.DB = DriverPq, "postgres", dsn, db
	return tg
}

// pqDSN is dsn for lib/pq, whose default sslmode is require where pgx's
// is prefer: without sslmode, it gets disable, as pgx falls back to.
func pqDSN(dsn string) string {
	if strings.Contains(dsn, "sslmode") {
		return dsn
	}
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("sslmode", "disable")
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " sslmode=disable"
}
