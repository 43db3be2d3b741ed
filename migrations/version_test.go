package migrations_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// TestVersionOnlyReads: Version creates nothing in a database never
// migrated, and answers on a read-only connection, before and after Up
// (PostgreSQL: default_transaction_read_only; MySQL: a user allowed only
// SELECT; SQLite: the file opened with mode=ro).
func TestVersionOnlyReads(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			own, schema := testdb.Isolated(t, tg, "sqllock_version", nil)
			// Opens (and so creates) the SQLite file, which a read-only
			// connection cannot.
			if err := own.DB.PingContext(ctx); err != nil {
				t.Fatal(err)
			}
			ro := readOnlyDB(t, own, schema)
			// The pool really is read-only.
			if _, err := ro.ExecContext(ctx, `CREATE TABLE sqllock_version_probe (id INTEGER)`); err == nil {
				t.Fatal("the read-only pool created a table")
			}

			for pool, db := range map[string]*sql.DB{"read-only": ro, "writable": own.DB} {
				if v, dirty, err := migrations.Version(ctx, db); err != nil || v != 0 || dirty {
					t.Fatalf("Version on the %s pool of a database never migrated = %d dirty=%v %v, want 0", pool, v, dirty, err)
				}
			}
			if historyExists(t, own) {
				t.Fatalf("Version created %s in a database never migrated", migrations.MigrationsTable)
			}

			if err := migrations.Up(ctx, own.DB); err != nil {
				t.Fatal(err)
			}
			if v, dirty, err := migrations.Version(ctx, ro); err != nil || v != migrations.Latest || dirty {
				t.Fatalf("Version on a read-only pool after Up = %d dirty=%v %v, want %d", v, dirty, err, migrations.Latest)
			}
			if err := setStoredVersion(t, own.DB, 8); err != nil {
				t.Fatal(err)
			}
			if _, _, err := migrations.Version(ctx, ro); !errors.As(err, new(*migrations.VersionError)) || !errors.Is(err, dblock.ErrSchemaMissing) {
				t.Fatalf("Version on a read-only pool at version 8 = %v, want a *VersionError", err)
			}
		})
	}
}

// historyExists reports whether MigrationsTable is in tg's schema.
func historyExists(t *testing.T, tg testdb.Target) bool {
	t.Helper()
	q := `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1`
	switch tg.Dialect {
	case dblock.MySQL:
		q = `SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?`
	case dblock.SQLite:
		q = `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`
	}
	var n int
	if err := tg.DB.QueryRowContext(t.Context(), q, migrations.MigrationsTable).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// readOnlyDB opens a pool on tg's database (schema, on the server) that
// cannot write, closed when the test ends.
func readOnlyDB(t *testing.T, tg testdb.Target, schema string) *sql.DB {
	t.Helper()
	switch tg.Dialect {
	case dblock.Postgres:
		u, err := url.Parse(tg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("default_transaction_read_only", "on")
		u.RawQuery = q.Encode()
		return testdb.Open(t, tg, u.String())
	case dblock.MySQL:
		cfg, err := mysql.ParseDSN(tg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		// A user of the test's own, named after its database (a plain
		// identifier), with a random password.
		var pw [12]byte
		_, _ = rand.Read(pw[:])
		cfg.User, cfg.Passwd = schema, hex.EncodeToString(pw[:])
		user := "'" + schema + "'@'%'"
		for _, q := range []string{
			`CREATE USER ` + user + ` IDENTIFIED BY '` + cfg.Passwd + `'`,
			`GRANT SELECT ON ` + schema + `.* TO ` + user,
		} {
			if _, err := tg.DB.ExecContext(t.Context(), q); err != nil {
				t.Fatalf("%s: %v", strings.Replace(q, cfg.Passwd, "***", 1), err)
			}
		}
		t.Cleanup(func() {
			if _, err := tg.DB.ExecContext(context.Background(), `DROP USER IF EXISTS `+user); err != nil {
				t.Errorf("DROP USER %s: %v", user, err)
			}
		})
		return testdb.Open(t, tg, cfg.FormatDSN())
	}
	return testdb.Open(t, tg, tg.DSN+"&mode=ro")
}
