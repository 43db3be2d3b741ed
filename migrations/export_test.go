package migrations

import (
	"context"
	"database/sql"
	"embed"

	"github.com/golang-migrate/migrate/v4"

	"github.com/sqllock/sqllock/dblock"
)

// ReleaseLock is releaseLock, for the tests.
func ReleaseLock(ctx context.Context, conn *sql.Conn, d dblock.Dialect) { releaseLock(ctx, conn, d) }

// LockKey is the name (MySQL) or hashtext input (PostgreSQL) of the
// migration lock.
const LockKey = lockKey

// history holds the nine migrations that version 1 replaced, as they were
// last: only the tests run them, to check that version 1 makes the schema
// they made.
//
//go:embed testdata/history
var history embed.FS

// UpHistory migrates db with the replaced migrations, to their version 9.
func UpHistory(ctx context.Context, db *sql.DB, d dblock.Dialect) error {
	return runFrom(ctx, db, d, history, "testdata/history/"+string(d), func(m *migrate.Migrate) error { return m.Up() })
}

// UpTo migrates db with sqllock's migrations up (or down) to version.
func UpTo(ctx context.Context, db *sql.DB, d dblock.Dialect, version uint) error {
	return runFrom(ctx, db, d, files, string(d), func(m *migrate.Migrate) error { return m.Migrate(version) })
}

// HistoryLatest is the version UpHistory migrates to.
const HistoryLatest = 9

// UpRan is Up, and reports whether it ran migrations (false: it found the
// schema current, under the migration lock).
func UpRan(ctx context.Context, db *sql.DB) (ran bool, err error) {
	d, err := resolve(ctx, db, nil)
	if err != nil {
		return false, err
	}
	err = runFrom(ctx, db, d, files, string(d), func(m *migrate.Migrate) error {
		err := m.Up()
		ran = err == nil
		return err
	})
	return ran, err
}
