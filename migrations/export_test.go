package migrations

import (
	"context"
	"database/sql"

	"github.com/golang-migrate/migrate/v4"

	"github.com/sqllock/sqllock/dblock"
)

// ReleaseLock is releaseLock, for the tests.
func ReleaseLock(ctx context.Context, conn *sql.Conn, d dblock.Dialect) { releaseLock(ctx, conn, d) }

// LockKey is the name (MySQL) or hashtext input (PostgreSQL) of the
// migration lock.
const LockKey = lockKey

// MigrateTo moves the schema to version, up or down.
func MigrateTo(ctx context.Context, db *sql.DB, d dblock.Dialect, version uint) error {
	return run(ctx, db, []Option{WithDialect(d)}, func(m *migrate.Migrate) error { return m.Migrate(version) })
}
