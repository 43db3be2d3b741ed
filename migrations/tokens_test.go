package migrations_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// TestForUpdateTokenCounter: Up makes forupdate's token counter of the
// server's kind, a sequence on PostgreSQL and MariaDB and a table on
// MySQL 8.0 (the MySQL file chooses with a prepared statement); tokens
// drawn from it grow, and one whose transaction rolled back is not drawn
// again; and the session the migration ran on goes back to the pool
// without the user variable it used.
func TestForUpdateTokenCounter(t *testing.T) {
	type queryer interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}
	nextval := func(ctx context.Context, q queryer, query string) (int64, error) {
		var v int64
		err := q.QueryRowContext(ctx, query).Scan(&v)
		return v, err
	}
	replace := func(ctx context.Context, q queryer) (int64, error) {
		res, err := q.ExecContext(ctx, `REPLACE INTO dblock_forupdate_tokens (name) VALUES ('a')`)
		if err != nil {
			return 0, err
		}
		return res.LastInsertId()
	}
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			db, _ := isolated(t, tg)
			// One connection: the one the migration ran on is the one read.
			db.SetMaxOpenConns(1)
			if err := migrations.Up(ctx, db); err != nil {
				t.Fatalf("Up: %v", err)
			}

			draw := func(ctx context.Context, q queryer) (int64, error) {
				return nextval(ctx, q, `SELECT nextval('dblock_forupdate_tokens')`)
			}
			wantKind, leftovers := "S", `SELECT 0`
			if tg.Dialect == dblock.MySQL {
				leftovers = `SELECT @sqllock_sql IS NOT NULL`
				wantKind = "BASE TABLE"
				draw = replace
				if testdb.IsMariaDB(t, tg) {
					wantKind = "SEQUENCE"
					draw = func(ctx context.Context, q queryer) (int64, error) {
						return nextval(ctx, q, `SELECT NEXTVAL(dblock_forupdate_tokens)`)
					}
				}
			}
			var n int
			if err := db.QueryRowContext(ctx, leftovers).Scan(&n); err != nil || n != 0 {
				t.Fatalf("after Up: %d user variables left on the session (%v)", n, err)
			}
			kind := `SELECT relkind::text FROM pg_class WHERE oid = 'dblock_forupdate_tokens'::regclass`
			if tg.Dialect == dblock.MySQL {
				kind = `SELECT table_type FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'dblock_forupdate_tokens'`
			}
			var gotKind string
			if err := db.QueryRowContext(ctx, kind).Scan(&gotKind); err != nil || gotKind != wantKind {
				t.Fatalf("dblock_forupdate_tokens is a %q (%v), want a %q", gotKind, err, wantKind)
			}

			var last int64
			for _, commit := range []bool{true, false, true} {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				tok, err := draw(ctx, tx)
				if err != nil {
					t.Fatalf("draw: %v", err)
				}
				if tok <= last {
					t.Fatalf("token %d after %d (the previous one committed or rolled back)", tok, last)
				}
				last = tok
				end := tx.Commit
				if !commit {
					end = tx.Rollback
				}
				if err := end(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
