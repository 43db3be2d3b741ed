package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/go-sql-driver/mysql"
	"github.com/golang-migrate/migrate/v4"
	gmysql "github.com/golang-migrate/migrate/v4/database/mysql"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// isolated returns a pool on a new schema (PostgreSQL) or database (MySQL)
// of its own, dropped when the test ends, so that Down here never drops the
// tables other packages' tests use at the same time, and so that every call
// starts from nothing (as a fresh deployment does). It also returns the DSN
// of that schema, for pools of other kinds (golang-migrate's own drivers).
func isolated(t *testing.T, tg testdb.Target) (*sql.DB, string) {
	t.Helper()
	own, _ := testdb.Isolated(t, tg, "sqllock_migrations", nil)
	return own.DB, own.DSN
}

func tableCount(t *testing.T, db *sql.DB, d dblock.Dialect) int {
	t.Helper()
	q := `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name LIKE 'dblock\_%'`
	switch d {
	case dblock.MySQL:
		q = `SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE 'dblock\_%'`
	case dblock.SQLite:
		q = `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'dblock\_%' ESCAPE '\'`
	}
	var n int
	if err := db.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestUpDownVersion(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			db, _ := isolated(t, tg)
			if v, dirty, err := migrations.Version(ctx, db); err != nil || v != 0 || dirty {
				t.Fatalf("Version before Up = %d %v %v, want 0", v, dirty, err)
			}

			// Four replicas starting at once.
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = migrations.Up(ctx, db)
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("concurrent Up: %v", err)
			}
			if err := migrations.Up(ctx, db); err != nil {
				t.Fatalf("Up again: %v", err)
			}
			if v, dirty, err := migrations.Version(ctx, db); err != nil || v != migrations.Latest || dirty {
				t.Fatalf("Version after Up = %d %v %v, want %d", v, dirty, err, migrations.Latest)
			}
			// PostgreSQL keeps forupdate's token counter in a sequence,
			// MySQL in a table; SQLite has no forupdate tables.
			want := map[dblock.Dialect]int{dblock.Postgres: 7, dblock.MySQL: 7, dblock.SQLite: 5}[tg.Dialect]
			if n := tableCount(t, db, tg.Dialect); n != want {
				t.Fatalf("%d dblock_ tables after Up, want %d", n, want)
			}
			// The caller's pool is open and has nothing checked out.
			if err := db.PingContext(ctx); err != nil {
				t.Fatalf("pool unusable after Up: %v", err)
			}
			if inUse := db.Stats().InUse; inUse != 0 {
				t.Fatalf("%d connections left checked out", inUse)
			}
			if err := migrations.Down(ctx, db); err != nil {
				t.Fatalf("Down: %v", err)
			}
			if n := tableCount(t, db, tg.Dialect); n != 0 {
				t.Fatalf("%d dblock_ tables after Down", n)
			}
			if v, _, err := migrations.Version(ctx, db); err != nil || v != 0 {
				t.Fatalf("Version after Down = %d, %v", v, err)
			}
			if inUse := db.Stats().InUse; inUse != 0 {
				t.Fatalf("%d connections left checked out after Down", inUse)
			}
		})
	}
}

// appMigrations is an application's own golang-migrate history: one
// migration that creates a table of its own.
var appMigrations = fstest.MapFS{
	"1_orders.up.sql":   {Data: []byte("CREATE TABLE app_orders (id BIGINT NOT NULL PRIMARY KEY)")},
	"1_orders.down.sql": {Data: []byte("DROP TABLE app_orders")},
}

// migrateApp runs the application's migrations with golang-migrate's own
// driver, as the application would, on a pool of its own (golang-migrate
// closes it) and returns the version golang-migrate then reports.
// PostgreSQL: golang-migrate's pgx/v5 driver needs github.com/jackc/pgerrcode,
// which this module does not require, so its table and row are written
// here with the driver's own DDL (database/pgx/v5/pgx.go,
// ensureVersionTable) and SetVersion's INSERT.
func migrateApp(t *testing.T, tg testdb.Target, db *sql.DB, dsn string, up bool) (version uint, dirty bool) {
	t.Helper()
	ctx := t.Context()
	if tg.Dialect == dblock.Postgres {
		if up {
			for _, q := range []string{
				`CREATE TABLE IF NOT EXISTS "schema_migrations" (version bigint not null primary key, dirty boolean not null)`,
				string(appMigrations["1_orders.up.sql"].Data),
				`TRUNCATE "schema_migrations"`,
				`INSERT INTO "schema_migrations" (version, dirty) VALUES (1, false)`,
			} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
		}
		if err := db.QueryRowContext(ctx, `SELECT version, dirty FROM "schema_migrations" LIMIT 1`).Scan(&version, &dirty); err != nil {
			t.Fatalf("application's version: %v", err)
		}
		return version, dirty
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MultiStatements = true // golang-migrate's mysql driver requires it
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	drv, err := gmysql.WithInstance(sql.OpenDB(conn), &gmysql.Config{})
	if err != nil {
		t.Fatalf("golang-migrate mysql driver: %v", err)
	}
	src, err := iofs.New(appMigrations, ".")
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "mysql", drv)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if srcErr, dbErr := m.Close(); srcErr != nil || dbErr != nil {
			t.Errorf("closing golang-migrate: %v %v", srcErr, dbErr)
		}
	}()
	if up {
		if err := m.Up(); err != nil {
			t.Fatalf("application's golang-migrate Up: %v", err)
		}
	}
	version, dirty, err = m.Version()
	if err != nil {
		t.Fatalf("application's golang-migrate Version: %v", err)
	}
	return version, dirty
}

// appState is everything of the application's that sqllock must leave
// alone: its history rows and its table.
func appState(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT version, dirty FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatalf("reading the application's history: %v", err)
	}
	defer rows.Close()
	var state []string
	for rows.Next() {
		var version int64
		var dirty bool
		if err := rows.Scan(&version, &dirty); err != nil {
			t.Fatal(err)
		}
		state = append(state, fmt.Sprintf("version %d dirty %v", version, dirty))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var orders int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM app_orders`).Scan(&orders); err != nil {
		t.Fatalf("the application's table: %v", err)
	}
	return strings.Join(state, ", ") + fmt.Sprintf("; app_orders has %d rows", orders)
}

// assertPoolClean checks that the caller's pool is open, has nothing
// checked out, and that its connection (the pool has one) holds no
// migration lock that would stall the next Up.
func assertPoolClean(t *testing.T, tg testdb.Target, db *sql.DB, after string) {
	t.Helper()
	ctx := t.Context()
	if inUse := db.Stats().InUse; inUse != 0 {
		t.Fatalf("%d connections left checked out after %s", inUse, after)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatalf("caller's pool unusable after %s: %v", after, err)
	}
	defer conn.Close()
	q := `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()`
	if tg.Dialect == dblock.MySQL {
		q = `SELECT count(*) FROM (SELECT 1 AS one) x WHERE IS_USED_LOCK('sqllock_schema_migrations') = CONNECTION_ID()`
	}
	var held int
	if err := conn.QueryRowContext(ctx, q).Scan(&held); err != nil {
		t.Fatalf("caller's pool unusable after %s: %v", after, err)
	}
	if held != 0 {
		t.Fatalf("the caller's connection still holds the migration lock after %s", after)
	}
}

// TestAppHistoryUntouched migrates an application with golang-migrate
// first, as a real service has, then runs sqllock's Up, Version and Down
// on the same schema: the application's history and tables must be as
// they were, and the caller's single-connection pool must come back open,
// idle and holding no lock.
func TestAppHistoryUntouched(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			db, dsn := isolated(t, tg)
			// One connection: Up must make do with it and give it back.
			db.SetMaxOpenConns(1)
			if v, dirty := migrateApp(t, tg, db, dsn, true); v != 1 || dirty {
				t.Fatalf("application at version %d dirty=%v after its own migration, want 1", v, dirty)
			}
			want := "version 1 dirty false; app_orders has 0 rows"
			if got := appState(t, db); got != want {
				t.Fatalf("application's state before sqllock: %s, want %s", got, want)
			}

			if err := migrations.Up(ctx, db); err != nil {
				t.Fatalf("Up: %v", err)
			}
			assertPoolClean(t, tg, db, "Up")
			if v, dirty, err := migrations.Version(ctx, db); err != nil || v != migrations.Latest || dirty {
				t.Fatalf("Version after Up = %d %v %v, want %d", v, dirty, err, migrations.Latest)
			}
			assertPoolClean(t, tg, db, "Version")
			if got := appState(t, db); got != want {
				t.Fatalf("application's state after sqllock's Up: %s, want %s", got, want)
			}
			if v, dirty := migrateApp(t, tg, db, dsn, false); v != 1 || dirty {
				t.Fatalf("golang-migrate reports the application at %d dirty=%v after sqllock's Up, want 1", v, dirty)
			}

			if err := migrations.Down(ctx, db); err != nil {
				t.Fatalf("Down: %v", err)
			}
			assertPoolClean(t, tg, db, "Down")
			if v, _, err := migrations.Version(ctx, db); err != nil || v != 0 {
				t.Fatalf("Version after Down = %d, %v", v, err)
			}
			if got := appState(t, db); got != want {
				t.Fatalf("application's state after sqllock's Down: %s, want %s", got, want)
			}
			if v, dirty := migrateApp(t, tg, db, dsn, false); v != 1 || dirty {
				t.Fatalf("golang-migrate reports the application at %d dirty=%v after sqllock's Down, want 1", v, dirty)
			}
		})
	}
}

// TestConcurrentUpFreshSchema starts several replicas at once against a
// database that has never been migrated, which is when their first
// statements race: PostgreSQL's CREATE TABLE IF NOT EXISTS is not safe
// against itself (two sessions can both see no table and one then fails
// with 23505 on pg_type or 42P07), so nothing may be created before the
// migration lock is held. Each round gets a new schema, so every round
// races on creation.
func TestConcurrentUpFreshSchema(t *testing.T) {
	const rounds, replicas = 6, 8
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			for round := range rounds {
				t.Run(fmt.Sprintf("round%d", round), func(t *testing.T) {
					ctx := t.Context()
					db, _ := isolated(t, tg)
					// Open the connections first, so the Up calls do not
					// spread out behind connection set-up and really overlap.
					db.SetMaxIdleConns(replicas)
					conns := make([]*sql.Conn, replicas)
					for i := range conns {
						c, err := db.Conn(ctx)
						if err != nil {
							t.Fatal(err)
						}
						if err := c.PingContext(ctx); err != nil {
							t.Fatal(err)
						}
						conns[i] = c
					}
					for _, c := range conns {
						_ = c.Close()
					}

					start := make(chan struct{})
					errs := make([]error, replicas)
					var wg sync.WaitGroup
					for i := range errs {
						wg.Go(func() {
							<-start
							errs[i] = migrations.Up(ctx, db)
						})
					}
					close(start)
					wg.Wait()
					for i, err := range errs {
						if err != nil {
							t.Errorf("replica %d: Up: %v", i, err)
						}
					}
					if v, dirty, err := migrations.Version(ctx, db); err != nil || v != migrations.Latest || dirty {
						t.Fatalf("Version after concurrent Up = %d dirty=%v %v, want %d", v, dirty, err, migrations.Latest)
					}
					want := map[dblock.Dialect]int{dblock.Postgres: 7, dblock.MySQL: 7}[tg.Dialect]
					if n := tableCount(t, db, tg.Dialect); n != want {
						t.Fatalf("%d dblock_ tables after Up, want %d", n, want)
					}
					if inUse := db.Stats().InUse; inUse != 0 {
						t.Fatalf("%d connections left checked out", inUse)
					}
					assertPoolHoldsNoMigrationLock(t, ctx, db, tg.Dialect, replicas)
				})
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	if err := migrations.Up(ctx, nil); !errors.Is(err, dblock.ErrInvalidDB) {
		t.Errorf("nil db: %v", err)
	}
	tg := testdb.AllTargets(t)[0]
	if err := migrations.Up(ctx, tg.DB, migrations.WithDialect("oracle")); !errors.Is(err, dblock.ErrUnknownDialect) {
		t.Errorf("unknown dialect: %v", err)
	}
	other := dblock.MySQL
	if tg.Dialect == dblock.MySQL {
		other = dblock.Postgres
	}
	if err := migrations.Up(ctx, tg.DB, migrations.WithDialect(other)); !errors.Is(err, dblock.ErrUnknownDialect) {
		t.Errorf("dialect %s on a %s driver: %v, want ErrUnknownDialect", other, tg.Dialect, err)
	}
	if err := migrations.Up(ctx, tg.DB, nil); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("nil option: %v, want ErrInvalidOption", err)
	}
	if _, err := migrations.Files("oracle"); !errors.Is(err, dblock.ErrUnknownDialect) {
		t.Errorf("Files(oracle): %v", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := migrations.Up(canceled, tg.DB); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
}

// columnTimestamp matches a TIMESTAMP column type (not DATETIME, not
// UTC_TIMESTAMP).
var columnTimestamp = regexp.MustCompile(`(?i)\s+TIMESTAMP\b`)

func TestFiles(t *testing.T) {
	for _, d := range []dblock.Dialect{dblock.Postgres, dblock.MySQL} {
		files, err := migrations.Files(d)
		if err != nil {
			t.Fatal(err)
		}
		names, err := fs.Glob(files, "*.sql")
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != 2*migrations.Latest {
			t.Errorf("%s: %d files, want an up and a down for each of %d versions: %v", d, len(names), migrations.Latest, names)
		}
		for _, n := range names {
			b, _ := fs.ReadFile(files, n)
			for _, line := range strings.Split(string(b), "\n") {
				code, _, _ := strings.Cut(line, "--")
				if d == dblock.MySQL && columnTimestamp.MatchString(code) {
					t.Errorf("%s: %q uses TIMESTAMP, which shifts with the session time zone", n, line)
				}
			}
		}
	}
}
