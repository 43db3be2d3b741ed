package lockkit_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite" // driver "sqlite"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// TestSQLiteDialect: modernc.org/sqlite is told from its driver and by
// name.
func TestSQLiteDialect(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if d, err := lockkit.DetectDialect(db); err != nil || d != dblock.SQLite {
		t.Errorf("DetectDialect(modernc) = %q, %v; want sqlite", d, err)
	}
	for _, in := range []string{"sqlite", "SQLite3"} {
		if d, err := lockkit.ParseDialect(in); err != nil || d != dblock.SQLite {
			t.Errorf("ParseDialect(%q) = %q, %v", in, d, err)
		}
	}
}

// TestClassifySQLite sorts real SQLite errors: a write that found the file
// locked past its busy timeout is contention (never shown as SQLITE_BUSY),
// a missing lock table says to migrate, a read-only file is read-only.
func TestClassifySQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	open := func(params string) *sql.DB {
		db, err := sql.Open("sqlite", "file:"+path+params)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	db := open("")
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	_, err := db.ExecContext(ctx, `SELECT 1 FROM dblock_locks`)
	if c := lockkit.ClassifyError(err); c != lockkit.ClassMissingTable || !errors.Is(lockkit.WrapDBError("x", err), dblock.ErrSchemaMissing) {
		t.Errorf("missing table %v: class %v", err, c)
	}

	writer, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	if _, err := writer.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	_, err = open("?_pragma=busy_timeout(0)").ExecContext(ctx, `INSERT INTO t VALUES (1)`)
	if c := lockkit.ClassifyError(err); err == nil || c != lockkit.ClassContention {
		t.Errorf("write while another connection writes: %v, class %v; want contention", err, c)
	}
	if _, err := writer.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}

	_, err = open("?mode=ro").ExecContext(ctx, `INSERT INTO t VALUES (1)`)
	if c := lockkit.ClassifyError(err); err == nil || !errors.Is(lockkit.WrapDBError("x", err), dblock.ErrReadOnly) {
		t.Errorf("write to a read-only file: %v, class %v; want read-only", err, c)
	}
}

// TestCheckSQLite: a pool without a busy timeout is refused with
// dblock.ErrInvalidDB naming the DSN parameter; one with it passes.
func TestCheckSQLite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	for params, ok := range map[string]bool{"": false, "?" + lockkit.SQLiteSetup: true} {
		db, err := sql.Open("sqlite", "file:"+path+params)
		if err != nil {
			t.Fatal(err)
		}
		err = lockkit.CheckSQLite(ctx, db)
		_ = db.Close()
		if ok && err != nil || !ok && !errors.Is(err, dblock.ErrInvalidDB) {
			t.Errorf("DSN params %q: %v", params, err)
		}
	}
}
