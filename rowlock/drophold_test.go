package rowlock

import (
	"context"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestDropHoldsWaitsForTheRowLock: the drop of a hold that a cut-short
// acquisition may have left (store.dropHolds) must see a take that was
// waiting for the row's lock when the drop began and commits after it. A
// transaction of the test's own stands for that take: it locks the row,
// gives it to the owner, and commits only once the drop waits. Run alone,
// PostgreSQL's UPDATE would judge the row by the version it sees (not
// held) and wait for nobody.
func TestDropHoldsWaitsForTheRowLock(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			l, err := New(tg.DB)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			name := testdb.Name(t)
			k, err := l.TryAcquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if err := k.Release(ctx); err != nil {
				t.Fatal(err)
			}
			owner := dblock.Owner{Host: "h", ID: "late-take"}
			take := `UPDATE dblock_locks SET hold_count = 1, owner_host = $1, owner_id = $2,
    expires_at = clock_timestamp() + interval '1 hour' WHERE name = $3`
			self := `SELECT pg_backend_pid()`
			blocked := `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`
			held := `SELECT hold_count FROM dblock_locks WHERE name = $1`
			poll := 5 * time.Millisecond
			if tg.Dialect == dblock.MySQL {
				// InnoDB refreshes what INNODB_TRX shows only when it was
				// last read more than 0.1 s ago: a faster poll sees the
				// same picture for ever.
				poll = 150 * time.Millisecond
				take = `UPDATE dblock_locks SET hold_count = 1, owner_host = ?, owner_id = ?,
    expires_at = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR WHERE name = ?`
				self = `SELECT CONNECTION_ID()`
				blocked = `SELECT count(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND trx_mysql_thread_id <> ?`
				held = `SELECT hold_count FROM dblock_locks WHERE name = ?`
			}
			tx, err := tg.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			var session int64
			if err := tx.QueryRowContext(ctx, self).Scan(&session); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, take, owner.Host, owner.ID, name); err != nil {
				t.Fatal(err)
			}
			dropped := make(chan error, 1)
			go func() { dropped <- l.store.dropHolds(ctx, name, owner) }()
			// Commit the take only once the drop waits for its row lock
			// (asked on another connection: PostgreSQL's activity view is
			// a snapshot for a whole transaction).
			for {
				select {
				case err := <-dropped:
					t.Fatalf("the drop returned (%v) before the take committed: it did not wait for the row lock", err)
				default:
				}
				var n int
				if err := tg.DB.QueryRowContext(ctx, blocked, session).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					break
				}
				if ctx.Err() != nil {
					t.Fatal("the drop never waited for the row lock")
				}
				time.Sleep(poll)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := <-dropped; err != nil {
				t.Fatal(err)
			}
			var n int
			if err := tg.DB.QueryRowContext(ctx, held, name).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Fatalf("hold_count %d after the drop, want 0: the drop missed the take that committed after it began", n)
			}
		})
	}
}
