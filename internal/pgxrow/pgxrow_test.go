package pgxrow_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/pgxrow"
	"github.com/sqllock/sqllock/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// TestScan: on pgx's driver Scan runs the query and scans its row, or
// reports sql.ErrNoRows, inside the connection's open transaction too; on
// any other driver (go-sql-driver here) it runs nothing and says so, for
// the caller to fall back.
func TestScan(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			conn, err := tg.DB.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			isPgx := tg.Dialect == dblock.Postgres
			one, none := `SELECT $1::bigint + 1`, `SELECT 1 WHERE $1::bigint < 0`
			if !isPgx {
				one, none = `SELECT ? + 1`, `SELECT 1 FROM DUAL WHERE ? < 0`
			}

			var got int64
			ok, err := pgxrow.Scan(ctx, conn, one, []any{int64(41)}, &got)
			if ok != isPgx {
				t.Fatalf("Scan handled a %s connection: %v", tg.Name, ok)
			}
			if !isPgx {
				if err != nil || got != 0 {
					t.Fatalf("Scan on a non-pgx connection = %d, %v; want nothing run", got, err)
				}
				return
			}
			if err != nil || got != 42 {
				t.Fatalf("Scan = %d, %v; want 42", got, err)
			}
			if _, err := pgxrow.Scan(ctx, conn, none, []any{int64(1)}, &got); !errors.Is(err, sql.ErrNoRows) {
				t.Fatalf("Scan of no row = %v, want sql.ErrNoRows", err)
			}

			// Inside the connection's transaction: it sees the
			// transaction's own uncommitted work.
			tx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, `CREATE TEMPORARY TABLE pgxrow_scan (v bigint) ON COMMIT DROP`); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO pgxrow_scan VALUES (7)`); err != nil {
				t.Fatal(err)
			}
			if ok, err := pgxrow.Scan(ctx, conn, `SELECT v FROM pgxrow_scan WHERE v = $1`, []any{int64(7)}, &got); !ok || err != nil || got != 7 {
				t.Fatalf("Scan in the transaction = %v, %d, %v; want its uncommitted row 7", ok, got, err)
			}
		})
	}
}
