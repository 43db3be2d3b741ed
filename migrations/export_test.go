package migrations

import (
	"context"
	"database/sql"

	"github.com/sqllock/sqllock/dblock"
)

// ReleaseLock is releaseLock, for the tests.
func ReleaseLock(ctx context.Context, conn *sql.Conn, d dblock.Dialect) { releaseLock(ctx, conn, d) }

// LockKey is the name (MySQL) or hashtext input (PostgreSQL) of the
// migration lock.
const LockKey = lockKey
