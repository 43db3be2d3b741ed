package testdb_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqllock/sqllock/internal/testdb"
)

// TestReplicated: the pair is a migrated primary and a read-only standby
// that has everything once StopPrimary returns; after Promote the standby
// takes writes, and a pool on Target.DSN follows it there.
func TestReplicated(t *testing.T) {
	if testdb.LeftOut(t, "postgres") {
		return
	}
	ctx := t.Context()
	r := testdb.NewReplicated(t)
	db := r.Target.DB
	standby := testdb.Open(t, r.Target, r.StandbyDSN())

	if _, err := db.ExecContext(ctx, `CREATE TABLE replicated (n int)`); err != nil {
		t.Fatal(err)
	}
	const rows = 100
	for i := range rows {
		if _, err := db.ExecContext(ctx, `INSERT INTO replicated VALUES ($1)`, i); err != nil {
			t.Fatal(err)
		}
	}
	var pgErr *pgconn.PgError
	_, err := standby.ExecContext(ctx, `INSERT INTO replicated VALUES (-1)`)
	if !errors.As(err, &pgErr) || pgErr.Code != "25006" {
		t.Fatalf("insert on the standby = %v, want SQLSTATE 25006 (read-only)", err)
	}

	r.StopPrimary(t)
	var n int
	if err := standby.QueryRowContext(ctx, `SELECT count(*) FROM replicated`).Scan(&n); err != nil || n != rows {
		t.Fatalf("rows on the standby after StopPrimary = %d, %v, want %d: the switchover would lose commits", n, err, rows)
	}
	// Down, and the standby not promoted: no server takes writes. (A pool
	// opened now: db's connections to the old primary fail first.)
	var connErr *pgconn.ConnectError
	down := testdb.Open(t, r.Target, r.Target.DSN)
	if _, err := down.ExecContext(ctx, `INSERT INTO replicated VALUES (-1)`); !errors.As(err, &connErr) {
		t.Fatalf("insert with only a standby up = %v, want a *pgconn.ConnectError (target_session_attrs=read-write)", err)
	}

	r.Promote(t)
	var inRecovery bool
	if err := standby.QueryRowContext(ctx, `SELECT pg_is_in_recovery()`).Scan(&inRecovery); err != nil || inRecovery {
		t.Fatalf("pg_is_in_recovery() after Promote = %v, %v", inRecovery, err)
	}
	if _, err := down.ExecContext(ctx, `INSERT INTO replicated VALUES ($1)`, rows); err != nil {
		t.Fatalf("insert through Target.DSN after Promote: %v", err)
	}
	if err := standby.QueryRowContext(ctx, `SELECT count(*) FROM replicated`).Scan(&n); err != nil || n != rows+1 {
		t.Fatalf("rows on the promoted standby = %d, %v, want %d", n, err, rows+1)
	}
}
