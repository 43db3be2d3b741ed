package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/migrations"
)

// Isolated returns tg on a schema (PostgreSQL) or database (MySQL) of its
// own, named prefix_ and 48 random bits, created now and dropped when the
// test ends, with a pool of its own, and the schema's name. params are
// added to the DSN (MySQL: session variables; PostgreSQL: run-time
// parameters). The schema is empty: a test that needs sqllock's tables runs
// migrations.Up on it. For tests that sweep or drop whole tables, or need
// their own server settings, without disturbing the shared tables other
// packages' tests use at the same time.
//
// On SQLite, where every test has a file of its own already, it is an
// empty file beside it (prefix.db), and params must be empty.
func Isolated(t testing.TB, tg Target, prefix string, params map[string]string) (Target, string) {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	// The prefix is the test's own constant and the rest hex: a plain
	// identifier, safe to put in the statements below.
	name := prefix + "_" + hex.EncodeToString(b[:])
	if tg.Dialect == dblock.SQLite {
		if len(params) > 0 {
			t.Fatalf("testdb: Isolated: SQLite takes no params (got %v)", params)
		}
		tg.DSN = sqliteDSN(t, name+".db")
		tg.DB = Open(t, tg, tg.DSN)
		return tg, name
	}
	create, drop := `CREATE SCHEMA `+name, `DROP SCHEMA IF EXISTS `+name+` CASCADE`
	if tg.Dialect == dblock.MySQL {
		create, drop = `CREATE DATABASE `+name, `DROP DATABASE IF EXISTS `+name
	}
	shared := tg.DB
	if _, err := shared.ExecContext(context.Background(), create); err != nil {
		t.Fatalf("testdb: %s: %v", create, err)
	}
	// Registered before Open's: the pool closes first, then the drop.
	t.Cleanup(func() {
		if _, err := shared.ExecContext(context.Background(), drop); err != nil {
			t.Errorf("testdb: %s: %v", drop, err)
		}
	})
	tg.DSN = dsnFor(t, tg, name, params)
	tg.DB = Open(t, tg, tg.DSN)
	return tg, name
}

// dsnFor is tg's DSN on the schema or database name (tg's own when name is
// ""), with params added.
func dsnFor(t testing.TB, tg Target, name string, params map[string]string) string {
	t.Helper()
	if tg.Dialect == dblock.MySQL {
		cfg, err := mysql.ParseDSN(tg.DSN)
		if err != nil {
			t.Fatalf("testdb: MySQL DSN: %v", err)
		}
		if name != "" {
			cfg.DBName = name
		}
		if cfg.Params == nil && len(params) > 0 {
			cfg.Params = map[string]string{}
		}
		for k, v := range params {
			cfg.Params[k] = v
		}
		return cfg.FormatDSN()
	}
	u, err := url.Parse(tg.DSN)
	if err != nil || !strings.HasPrefix(u.Scheme, "postgres") {
		t.Fatalf("testdb: PostgreSQL DSN %q is not a postgres:// URL", tg.DSN)
	}
	q := u.Query()
	if name != "" {
		q.Set("search_path", name)
	}
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Migrated is Isolated (without params) with sqllock's tables created by
// migrations.Up: a schema of the test's own for tests that change or
// inspect whole tables.
func Migrated(t testing.TB, tg Target, prefix string) Target {
	t.Helper()
	own, _ := Isolated(t, tg, prefix, nil)
	if err := migrations.Up(t.Context(), own.DB); err != nil {
		t.Fatalf("testdb: migrations.Up on %s: %v", prefix, err)
	}
	return own
}
