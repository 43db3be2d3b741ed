package migrations_test

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// storedVersion reads MigrationsTable's row as it is, without the
// migrations' reading of it.
func storedVersion(t *testing.T, db *sql.DB) (version int64, dirty bool) {
	t.Helper()
	q := `SELECT version, dirty FROM ` + migrations.MigrationsTable
	if err := db.QueryRowContext(t.Context(), q).Scan(&version, &dirty); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return version, dirty
}

// setStoredVersion writes MigrationsTable's row, clean, as it is.
func setStoredVersion(t *testing.T, db *sql.DB, version int) error {
	q := fmt.Sprintf(`UPDATE %s SET version = %d, dirty = false`, migrations.MigrationsTable, version)
	if _, err := db.ExecContext(t.Context(), q); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

// TestReplacedHistoryVersions: a database that the replaced migrations
// left clean at their version 9 is at version 1 (the same tables): Up
// migrates it on to Latest, and Down drops it. At any other of their versions,
// or dirty, Up, Down and Version return a *VersionError that is
// ErrSchemaMissing, and change nothing.
func TestReplacedHistoryVersions(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			db, _ := isolated(t, tg)
			if err := migrations.UpHistory(ctx, db, tg.Dialect); err != nil {
				t.Fatalf("the replaced migrations: %v", err)
			}
			if v, dirty, err := migrations.Version(ctx, db); err != nil || v != 1 || dirty {
				t.Fatalf("Version at the history's 9 = %d dirty=%v %v, want 1", v, dirty, err)
			}
			if err := migrations.Up(ctx, db); err != nil {
				t.Fatalf("Up at the history's 9: %v", err)
			}
			if v, dirty := storedVersion(t, db); v != migrations.Latest || dirty {
				t.Fatalf("Up left the history's row at %d dirty=%v, want %d", v, dirty, migrations.Latest)
			}

			for _, stored := range []struct {
				version int
				dirty   bool
			}{{8, false}, {migrations.HistoryLatest, true}, {migrations.HistoryLatest + 1, false}} {
				q := fmt.Sprintf(`UPDATE %s SET version = %d, dirty = %v`, migrations.MigrationsTable, stored.version, stored.dirty)
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				for call, err := range map[string]error{
					"Up":   migrations.Up(ctx, db),
					"Down": migrations.Down(ctx, db),
				} {
					var verr *migrations.VersionError
					if !errors.As(err, &verr) || verr.Version != uint(stored.version) || verr.Dirty != stored.dirty || !errors.Is(err, dblock.ErrSchemaMissing) {
						t.Fatalf("%s at version %d dirty=%v = %v, want a *VersionError that is ErrSchemaMissing", call, stored.version, stored.dirty, err)
					}
				}
				if _, _, err := migrations.Version(ctx, db); !errors.As(err, new(*migrations.VersionError)) {
					t.Fatalf("Version at version %d dirty=%v = %v, want a *VersionError", stored.version, stored.dirty, err)
				}
				if n := tableCount(t, db, tg.Dialect); n == 0 {
					t.Fatalf("version %d dirty=%v: the tables are gone", stored.version, stored.dirty)
				}
			}

			// Back to the tables the history's 9 left (version 1's), then
			// its row: Down drops them all.
			for _, step := range []func() error{
				func() error { return setStoredVersion(t, db, migrations.Latest) },
				func() error { return migrations.UpTo(ctx, db, tg.Dialect, 1) },
				func() error { return setStoredVersion(t, db, migrations.HistoryLatest) },
			} {
				if err := step(); err != nil {
					t.Fatal(err)
				}
			}
			if err := migrations.Down(ctx, db); err != nil {
				t.Fatalf("Down at the history's 9: %v", err)
			}
			if n := tableCount(t, db, tg.Dialect); n != 0 {
				t.Fatalf("%d dblock_ tables after Down", n)
			}
			if v, _, err := migrations.Version(ctx, db); err != nil || v != 0 {
				t.Fatalf("Version after Down = %d, %v", v, err)
			}
		})
	}
}
