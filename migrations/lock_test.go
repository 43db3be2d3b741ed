package migrations_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// holdsMigrationLock reports whether conn's session holds the migration
// lock, without changing anything.
func holdsMigrationLock(t testing.TB, ctx context.Context, conn *sql.Conn, d dblock.Dialect) bool {
	t.Helper()
	q := `SELECT count(*) > 0 FROM pg_locks
WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
  AND objid = (hashtext($1)::bigint & 4294967295)::oid`
	if d == dblock.MySQL {
		q = `SELECT COALESCE(IS_USED_LOCK(?) = CONNECTION_ID(), FALSE)`
	}
	var held bool
	if err := conn.QueryRowContext(ctx, q, migrations.LockKey).Scan(&held); err != nil {
		t.Fatalf("reading the migration lock: %v", err)
	}
	return held
}

// assertPoolHoldsNoMigrationLock checks every connection db can hand out
// (n at most, idle ones first): none may hold the migration lock once Up
// has returned, or every later Up against the server would wait for it.
func assertPoolHoldsNoMigrationLock(t testing.TB, ctx context.Context, db *sql.DB, d dblock.Dialect, n int) {
	t.Helper()
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if holdsMigrationLock(t, ctx, c, d) {
			t.Fatal("a connection of the caller's pool still holds the migration lock after Up returned")
		}
	}
}

// TestReleaseLockLeavesNoHold: the clean-up that runs before Up's
// connection returns to the pool releases the migration lock however many
// times the session took it (both dialects count re-entries), and leaves a
// session that does not hold it alone.
func TestReleaseLockLeavesNoHold(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			lock := `SELECT pg_advisory_lock(hashtext($1))`
			if tg.Dialect == dblock.MySQL {
				lock = `SELECT GET_LOCK(?, 30)`
			}
			for _, holds := range []int{0, 1, 2, 3} {
				conn, err := tg.DB.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for range holds {
					if _, err := conn.ExecContext(ctx, lock, migrations.LockKey); err != nil {
						t.Fatal(err)
					}
				}
				if got := holdsMigrationLock(t, ctx, conn, tg.Dialect); got != (holds > 0) {
					t.Fatalf("after %d takes the session holds the lock: %v", holds, got)
				}
				migrations.ReleaseLock(ctx, conn, tg.Dialect)
				if holdsMigrationLock(t, ctx, conn, tg.Dialect) {
					t.Fatalf("taken %d times: still held after ReleaseLock", holds)
				}
				_ = conn.Close()
			}
		})
	}
}
