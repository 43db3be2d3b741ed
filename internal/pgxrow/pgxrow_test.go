package pgxrow_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"

	_ "github.com/lib/pq" // driver "postgres", for TestOtherDrivers

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
			pg := pgxrow.Wrap(tg.DB)
			isPgx := tg.Dialect == dblock.Postgres
			one, none := `SELECT $1::bigint + 1`, `SELECT 1 WHERE $1::bigint < 0`
			if !isPgx {
				one, none = `SELECT ? + 1`, `SELECT 1 FROM DUAL WHERE ? < 0`
			}

			var got int64
			ok, err := pg.Scan(ctx, conn, one, []any{int64(41)}, &got)
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
			if _, err := pg.Scan(ctx, conn, none, []any{int64(1)}, &got); !errors.Is(err, sql.ErrNoRows) {
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
			if ok, err := pg.Scan(ctx, conn, `SELECT v FROM pgxrow_scan WHERE v = $1`, []any{int64(7)}, &got); !ok || err != nil || got != 7 {
				t.Fatalf("Scan in the transaction = %v, %d, %v; want its uncommitted row 7", ok, got, err)
			}
		})
	}
}

// TestPath: a pool's first statement finds out whether a pooler is in the
// path, by a statement of the pool, by Scan or by DetectOn (for
// statements in a transaction), and statements then work
// there, from many goroutines at once, on the pool, a connection, a
// transaction, and through Scan; before anyone knows too.
func TestPath(t *testing.T) {
	if testdb.LeftOut(t, "postgres") {
		return
	}
	direct := testdb.Targets(t)[0]
	if direct.Dialect != dblock.Postgres {
		t.Fatalf("the first target is %s, want PostgreSQL", direct.Name)
	}
	for _, c := range []struct {
		tg     testdb.Target
		pooled bool
	}{
		{direct, false},
		{testdb.PgBouncer(t), true},
	} {
		t.Run(c.tg.Name, func(t *testing.T) {
			ctx := t.Context()
			first := map[string]func(pgxrow.DB) error{
				"pool": func(d pgxrow.DB) error {
					var got int64
					return d.QueryRowContext(ctx, `SELECT $1::bigint`, int64(1)).Scan(&got)
				},
				"DetectOn": func(d pgxrow.DB) error {
					conn, err := c.tg.DB.Conn(ctx)
					if err != nil {
						return err
					}
					defer conn.Close()
					d.DetectOn(ctx, conn)
					return nil
				},
				"Scan": func(d pgxrow.DB) error {
					conn, err := c.tg.DB.Conn(ctx)
					if err != nil {
						return err
					}
					defer conn.Close()
					var got int64
					_, err = d.Scan(ctx, conn, `SELECT $1::bigint`, []any{int64(1)}, &got)
					return err
				},
			}
			for by, run := range first {
				d := pgxrow.Wrap(c.tg.DB)
				if _, known := d.Pooled(); known {
					t.Fatalf("Pooled known before any statement")
				}
				if err := run(d); err != nil {
					t.Fatalf("first statement by %s: %v", by, err)
				}
				if pooled, known := d.Pooled(); pooled != c.pooled || !known {
					t.Fatalf("after a statement by %s, Pooled = %v, %v; want %v, true", by, pooled, known, c.pooled)
				}
			}

			// A fresh pool's statements, most before anyone knows.
			d := pgxrow.Wrap(c.tg.DB)
			const goroutines, times = 12, 10
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Go(func() {
					for i := range times {
						if err := statements(ctx, d, c.tg.DB, int64(g*times+i)); err != nil {
							errs <- fmt.Errorf("goroutine %d, time %d: %w", g, i, err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// statements runs statements with arguments every way DB offers and
// checks their results.
func statements(ctx context.Context, d pgxrow.DB, db *sql.DB, n int64) error {
	var got int64
	if err := d.QueryRowContext(ctx, `SELECT $1::bigint + 1`, n).Scan(&got); err != nil || got != n+1 {
		return fmt.Errorf("QueryRowContext = %d, %v", got, err)
	}
	if res, err := d.ExecContext(ctx, `SELECT 1 WHERE $1::bigint >= 0`, n); err != nil {
		return fmt.Errorf("ExecContext: %v", err)
	} else if rows, _ := res.RowsAffected(); rows != 1 {
		return fmt.Errorf("ExecContext affected %d rows", rows)
	}
	rows, err := d.QueryContext(ctx, `SELECT generate_series(1, $1::bigint)`, int64(3))
	if err != nil {
		return fmt.Errorf("QueryContext: %v", err)
	}
	count := 0
	for rows.Next() {
		count++
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil || count != 3 {
		return fmt.Errorf("QueryContext rows = %d, %v", count, err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := d.Scan(ctx, conn, `SELECT $1::bigint * 2`, []any{n}, &got); err != nil || got != 2*n {
		return fmt.Errorf("Scan = %d, %v", got, err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := d.On(tx).QueryRowContext(ctx, `SELECT $1::bigint - 1`, n).Scan(&got); err != nil || got != n-1 {
		return fmt.Errorf("On(tx).QueryRowContext = %d, %v", got, err)
	}
	return tx.Commit()
}

// TestOtherDrivers: with a driver other than pgx's, DB passes statements
// as they are, and finds out nothing: lib/pq and go-sql-driver would take
// a mode for a parameter, and fail on the count.
func TestOtherDrivers(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			db, query := tg.DB, `SELECT ? + 1`
			if tg.Dialect == dblock.Postgres {
				query = `SELECT $1::bigint + 1`
				u, err := url.Parse(tg.DSN)
				if err != nil {
					t.Fatal(err)
				}
				q := u.Query()
				q.Set("sslmode", "disable")
				u.RawQuery = q.Encode()
				if db, err = sql.Open("postgres", u.String()); err != nil { // lib/pq
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = db.Close() })
			}
			d := pgxrow.Wrap(db)
			var got int64
			if err := d.QueryRowContext(t.Context(), query, int64(41)).Scan(&got); err != nil || got != 42 {
				t.Fatalf("QueryRowContext on %T = %d, %v; want 42", db.Driver(), got, err)
			}
			if pooled, known := d.Pooled(); pooled || known {
				t.Fatalf("Pooled on %T = %v, %v; want nothing known", db.Driver(), pooled, known)
			}
		})
	}
}
