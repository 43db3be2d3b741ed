package migrations_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// TestForUpdateTokensAcrossVersion9: version 9 turns forupdate's counter
// into a sequence on MariaDB (PostgreSQL's is one already). Tokens drawn
// after the change, either way, are larger than every token drawn before
// it, including one whose transaction rolled back; and the session the
// migration ran on goes back to the pool without its user variables.
func TestForUpdateTokensAcrossVersion9(t *testing.T) {
	type draws struct {
		// before draws a token at version 8, in a transaction committed or
		// rolled back; after draws one at version 9 (maria: on MariaDB).
		before func(context.Context, *sql.Tx) (int64, error)
		after  func(ctx context.Context, c *sql.Conn, maria bool) (int64, error)
		// leftovers reads the migration's user variables on its session.
		leftovers string
	}
	nextval := func(ctx context.Context, q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}, query string) (int64, error) {
		var v int64
		err := q.QueryRowContext(ctx, query).Scan(&v)
		return v, err
	}
	cases := map[dblock.Dialect]draws{
		dblock.Postgres: {
			before: func(ctx context.Context, tx *sql.Tx) (int64, error) {
				return nextval(ctx, tx, `SELECT nextval('dblock_forupdate_tokens')`)
			},
			after: func(ctx context.Context, c *sql.Conn, _ bool) (int64, error) {
				return nextval(ctx, c, `SELECT nextval('dblock_forupdate_tokens')`)
			},
			leftovers: `SELECT 0`,
		},
		dblock.MySQL: {
			before: func(ctx context.Context, tx *sql.Tx) (int64, error) {
				res, err := tx.ExecContext(ctx, `REPLACE INTO dblock_forupdate_tokens (name) VALUES ('a')`)
				if err != nil {
					return 0, err
				}
				return res.LastInsertId()
			},
			after: func(ctx context.Context, c *sql.Conn, maria bool) (int64, error) {
				if !maria {
					// MySQL keeps the table.
					res, err := c.ExecContext(ctx, `REPLACE INTO dblock_forupdate_tokens (name) VALUES ('a')`)
					if err != nil {
						return 0, err
					}
					return res.LastInsertId()
				}
				return nextval(ctx, c, `SELECT NEXTVAL(dblock_forupdate_tokens)`)
			},
			leftovers: `SELECT (@sqllock_mariadb IS NOT NULL) + (@sqllock_sql IS NOT NULL) + (@sqllock_next IS NOT NULL)`,
		},
	}
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			db, _ := isolated(t, tg)
			// One connection: the one the migrations ran on is the one read.
			db.SetMaxOpenConns(1)
			c := cases[tg.Dialect]
			if err := migrations.MigrateTo(ctx, db, tg.Dialect, 8); err != nil {
				t.Fatalf("migrate to 8: %v", err)
			}
			var last int64
			for _, commit := range []bool{true, true, false} {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				tok, err := c.before(ctx, tx)
				if err != nil {
					t.Fatalf("draw at version 8: %v", err)
				}
				if tok <= last {
					t.Fatalf("token %d at version 8 after %d", tok, last)
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

			step := func(version uint) {
				t.Helper()
				if err := migrations.MigrateTo(ctx, db, tg.Dialect, version); err != nil {
					t.Fatalf("migrate to %d: %v", version, err)
				}
				conn, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				var n int
				if err := conn.QueryRowContext(ctx, c.leftovers).Scan(&n); err != nil || n != 0 {
					t.Fatalf("after migrating to %d: %d user variables left on the session (%v)", version, n, err)
				}
			}
			step(9)
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := c.after(ctx, conn, testdb.IsMariaDB(t, tg))
			_ = conn.Close()
			if err != nil {
				t.Fatalf("draw at version 9: %v", err)
			}
			if tok <= last {
				t.Fatalf("token %d at version 9, after %d at version 8 (the last one rolled back)", tok, last)
			}
			last = tok

			step(8)
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if tok, err = c.before(ctx, tx); err != nil {
				t.Fatalf("draw back at version 8: %v", err)
			}
			if tok <= last {
				t.Fatalf("token %d back at version 8, after %d at version 9", tok, last)
			}
		})
	}
}
