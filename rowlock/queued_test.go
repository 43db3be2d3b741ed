package rowlock_test

import (
	"errors"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/queue"
)

// TestTakeNeverSkipsALiveQueue: on MySQL an unqueued acquisition skips the
// fair queue's subquery while the name's row is not queued (myTakeFast).
// Once a fair waiter has queued, through the queue's own Enqueue, no
// unqueued acquisition gets the lapsed lock while that waiter lives; once it
// leaves, one does, and the row is unqueued again. On PostgreSQL the take
// always checks the queue; the same acquisitions must behave alike.
func TestTakeNeverSkipsALiveQueue(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			name := testdb.Name(t)
			cycle := func() {
				t.Helper()
				k, err := l.TryAcquire(ctx, name)
				if err != nil {
					t.Fatalf("TryAcquire with nobody queued: %v", err)
				}
				release(t, k)
			}
			// A row is created queued; the first takeover finds no waiter
			// and clears it.
			cycle()
			cycle()
			if tg.Dialect == dblock.MySQL && queued(t, tg, name) {
				t.Fatal("queued after takeovers that found no waiter: the fast take is never used")
			}
			q, err := queue.New(tg.DB, queue.WithDialect(tg.Dialect))
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			ticket, err := q.Enqueue(ctx, name, lockinput.NewOwner(), 0)
			if err != nil {
				t.Fatal(err)
			}
			if tg.Dialect == dblock.MySQL && !queued(t, tg, name) {
				t.Fatal("not queued after a fair waiter queued")
			}
			for range 3 {
				if k, err := l.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
					if err == nil {
						release(t, k)
					}
					t.Fatalf("TryAcquire past a live fair waiter: %v, want dblock.ErrNotAcquired", err)
				}
			}
			if err := ticket.Leave(ctx); err != nil {
				t.Fatal(err)
			}
			cycle()
			if tg.Dialect == dblock.MySQL && queued(t, tg, name) {
				t.Fatal("still queued after the only waiter left and the lock was taken over")
			}
		})
	}
}

// queued reads name's queued flag (MySQL).
func queued(t testing.TB, tg testdb.Target, name string) bool {
	t.Helper()
	var q bool
	if err := tg.DB.QueryRowContext(t.Context(), `SELECT queued FROM dblock_locks WHERE name = ?`, name).Scan(&q); err != nil {
		t.Fatal(err)
	}
	return q
}
