package rowlock

import (
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestOnlyReleasesSkipTheFlush checks the two halves of the argument in the
// package doc ("Releases that do not wait for the disk") on PostgreSQL, by
// running the statements in a transaction of the test's own and asking the
// server: the release turns synchronous_commit off for its transaction and
// no longer; the statements that take a lock and draw its token leave it on.
func TestOnlyReleasesSkipTheFlush(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		if tg.Dialect != dblock.Postgres {
			continue // MySQL has no per-transaction setting: every release flushes
		}
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			conn, err := tg.DB.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			setting := func() string {
				t.Helper()
				var v string
				if err := conn.QueryRowContext(ctx, `SHOW synchronous_commit`).Scan(&v); err != nil {
					t.Fatal(err)
				}
				return v
			}
			if v := setting(); v != "on" {
				t.Fatalf("synchronous_commit is %q on the test server, want on", v)
			}
			name := testdb.Name(t)
			const host, owner = "h", "o"
			cases := []struct {
				stmt string
				args []any
				want string
			}{
				// A fresh name: the insert draws the first token.
				// The last argument of the takes is the failover pause: off.
				{pgInsert, []any{name, stripeOf(name), host, owner, "", int64(30e6), int64(0), int64(1 << 62), int64(0), int64(0)}, "on"},
				{pgRelease, []any{name, host, owner, int64(-1), "p"}, "off"}, // the token: filled in below
				// The name's row exists: a takeover draws the next token.
				{pgTake, []any{name, host, owner, "", int64(30e6), int64(0), int64(1 << 62), int64(0), int64(0)}, "on"},
				{pgRelease, []any{name, host, owner, int64(-1), "p"}, "off"},
			}
			var token int64
			// inTx runs case c in a transaction and returns the setting seen
			// in it. A failure rolls the transaction back first: conn.Close,
			// deferred, would wait for it forever.
			inTx := func(i int, c struct {
				stmt string
				args []any
				want string
			}) string {
				t.Helper()
				tx, err := conn.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback() }()
				if c.stmt == pgRelease {
					c.args[3] = token
					if _, err := tx.ExecContext(ctx, c.stmt, c.args...); err != nil {
						t.Fatalf("statement %d: %v", i, err)
					}
				} else if err := tx.QueryRowContext(ctx, c.stmt, c.args...).Scan(&token); err != nil {
					t.Fatalf("statement %d: %v", i, err)
				}
				var v string
				if err := tx.QueryRowContext(ctx, `SHOW synchronous_commit`).Scan(&v); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				return v
			}
			for i, c := range cases {
				v := inTx(i, c)
				if v != c.want {
					t.Errorf("statement %d: synchronous_commit in its transaction = %q, want %q", i, v, c.want)
				}
				if v := setting(); v != "on" {
					t.Fatalf("statement %d: synchronous_commit after its transaction = %q, want on", i, v)
				}
			}
		})
	}
}
