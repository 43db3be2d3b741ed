package rowlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestCutShortTryLeavesNothingHeld: a TryAcquire whose take statement
// waits for the name's row lock (a transaction holds it) gives up when its
// context ends. PostgreSQL runs the statement anyway once the row lock
// comes free (found by this test: it fails there without dropOrphan),
// taking the lock for an owner that nobody will ever release; MariaDB
// appears to end it with its client's connection. Once the Locker has
// closed
// (Close waits for the drop it starts in the background), the name is
// free, long before the lease that take would have written could lapse.
func TestCutShortTryLeavesNothingHeld(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l, err := rowlock.New(tg.DB)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			name := testdb.Name(t)
			k, err := l.TryAcquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			release(t, k)
			blocker, err := tg.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer blocker.Rollback()
			lockRow := `SELECT 1 FROM dblock_locks WHERE name = $1 FOR UPDATE`
			if tg.Dialect == dblock.MySQL {
				lockRow = `SELECT 1 FROM dblock_locks WHERE name = ? FOR UPDATE`
			}
			var one int
			if err := blocker.QueryRowContext(ctx, lockRow, name).Scan(&one); err != nil {
				t.Fatal(err)
			}
			// The blocker's session, and how many sessions wait for it,
			// asked on another connection: PostgreSQL's activity view is
			// a snapshot for the whole of a transaction that reads it.
			self, blocked := `SELECT pg_backend_pid()`, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`
			poll := 5 * time.Millisecond
			if tg.Dialect == dblock.MySQL {
				self, blocked = `SELECT CONNECTION_ID()`, `
SELECT count(*) FROM information_schema.INNODB_LOCK_WAITS w
JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id
WHERE b.trx_mysql_thread_id = ?`
				// InnoDB refreshes what these views show only when they
				// were last read more than 0.1 s ago.
				poll = 150 * time.Millisecond
			}
			var session int64
			if err := blocker.QueryRowContext(ctx, self).Scan(&session); err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithCancel(ctx)
			tried := make(chan error, 1)
			go func() {
				_, err := l.TryAcquire(short, name)
				tried <- err
			}()
			// Cut the try short only once its take waits for the row lock:
			// the drop it then starts queues for the lock after it.
			waitCtx, stopWaiting := context.WithTimeout(ctx, time.Minute) // liveness bound
			defer stopWaiting()
			eventually(t, waitCtx, "the take to wait for the row lock", func() bool {
				select {
				case err := <-tried:
					t.Fatalf("TryAcquire returned before it waited for the row lock: %v", err)
				default:
				}
				var n int
				if err := tg.DB.QueryRowContext(ctx, blocked, session).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					time.Sleep(poll)
				}
				return n > 0
			})
			cancel()
			if err := <-tried; !errors.Is(err, dblock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
				t.Fatalf("TryAcquire cut short: %v, want ErrNotAcquired and Canceled", err)
			}
			if err := blocker.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if row := readRow(t, tg, name); row.holdCount != 0 {
				t.Fatalf("after the cut-short TryAcquire and Close: %+v; want nobody holding it", row)
			}
			other := newLocker(t, tg.DB)
			k, err = other.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire after the cut-short one: %v", err)
			}
			release(t, k)
		})
	}
}
