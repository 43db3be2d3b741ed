package testdb

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite" // driver "sqlite"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/migrations"
)

// SQLiteName is the SQLite target's name, for t.Run and
// SQLLOCK_TEST_DIALECTS.
const SQLiteName = "sqlite"

// SQLiteParams are the DSN parameters of every SQLite pool the tests open:
// the busy timeout sqllock requires, and WAL.
const SQLiteParams = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"

// AllTargets returns the databases of Targets and an SQLite one (a fresh
// file of the test's own; no server). Behaviour every dialect has (leases,
// tokens, reentrancy, fairness, waiting by polling, the reaper, the
// conformance suite) is tested over AllTargets; what needs a server (row
// locks and forupdate, session markers and crash detection, NOTIFY, the
// fault-injection proxy, poolers, failover) over Targets. Both honour
// SQLLOCK_TEST_DIALECTS.
func AllTargets(t testing.TB) []Target {
	t.Helper()
	out := Targets(t)
	if !LeftOut(t, SQLiteName) {
		out = append(out, SQLite(t))
	}
	return out
}

// sqliteDSNEnv passes an SQLite target's file to child processes (see
// ChildEnv).
const sqliteDSNEnv = "SQLLOCK_TEST_SQLITE_DSN"

// ChildEnv is the env a child process (see Child) needs to reach tg's
// database: nothing for a server, which every process reaches at the same
// DSN; for SQLite the file, which SQLite and AllTargets then return in the
// child rather than a fresh one.
func (tg Target) ChildEnv() []string {
	if tg.Dialect != dblock.SQLite {
		return nil
	}
	return []string{sqliteDSNEnv + "=" + tg.DSN}
}

// SQLite returns a migrated SQLite database in a file of its own in
// t.TempDir, closed when the test ends. Its DSN opens more pools on the
// same file, as other processes would (see ChildEnv).
func SQLite(t testing.TB) Target {
	t.Helper()
	tg := Target{Name: SQLiteName, Dialect: dblock.SQLite, DriverName: "sqlite", DSN: os.Getenv(sqliteDSNEnv)}
	if tg.DSN == "" || !IsChild() {
		tg.DSN = sqliteDSN(t, "locks.db")
	}
	db, err := sql.Open(tg.DriverName, tg.DSN)
	if err != nil {
		t.Fatalf("testdb: open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("testdb: sqlite: migrations.Up: %v", err)
	}
	tg.DB = db
	return tg
}

// sqliteDSN is the DSN of a new file named file in a directory of t's own.
func sqliteDSN(t testing.TB, file string) string {
	return "file:" + filepath.Join(t.TempDir(), file) + "?" + SQLiteParams
}
