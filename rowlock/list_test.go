package rowlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/queue"
	"github.com/sqllock/sqllock/rowlock"
)

// TestLocks lists what is taken on a schema of its own: held, reentered
// and lingering (released under MinHold) locks, in name order, but neither
// released nor expired ones.
func TestLocks(t *testing.T) {
	for _, shared := range testdb.AllTargets(t) {
		t.Run(shared.Name, func(t *testing.T) {
			tg := isolated(t, shared, nil).Target
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			take := func(ctx context.Context, name string, opts ...dblock.Option) *rowlock.Lock {
				t.Helper()
				k, err := l.TryAcquire(ctx, name, opts...)
				if err != nil {
					t.Fatalf("TryAcquire(%q): %v", name, err)
				}
				// Released or not, lost or not: it stops renewing.
				t.Cleanup(func() { _ = k.Release(context.Background()) })
				return k.(*rowlock.Lock)
			}
			// Taken out of name order: the listing sorts.
			b := take(ctx, "b", dblock.Note("note of b"), dblock.TTL(time.Minute))
			a := take(ctx, "a")
			take(a.Context(), "a") // re-entered: two holds
			lingering := take(ctx, "d", dblock.MinHold(time.Hour))
			release(t, lingering)
			release(t, take(ctx, "c"))
			take(ctx, "e")
			expireNow(t, tg, "e")

			type want struct {
				k     *rowlock.Lock
				holds int
				note  string
				ttl   time.Duration
			}
			held := []want{{a, 2, "", dblock.DefaultTTL}, {b, 1, "note of b", time.Minute}, {lingering, 0, "", time.Hour}}
			check := func(t *testing.T, got rowlock.HeldLock, w want) {
				t.Helper()
				owner := w.k.Owner()
				if got.Name != w.k.Name() || got.Token != w.k.Token() || got.OwnerHost != owner.Host || got.OwnerID != owner.ID ||
					got.HoldCount != w.holds || got.Note != w.note || got.HeldFor < 0 || got.ExpiresIn <= 0 || got.ExpiresIn > w.ttl {
					t.Errorf("%+v; want %q held %d times with token %d by %+v, note %q, lease within %v",
						got, w.k.Name(), w.holds, w.k.Token(), owner, w.note, w.ttl)
				}
			}
			for _, tc := range []struct {
				name  string
				limit int
				want  []want
			}{
				{"all", 100, held},
				{"exactly all", 3, held},
				{"the first two", 2, held[:2]},
				{"the first", 1, held[:1]},
			} {
				t.Run(tc.name, func(t *testing.T) {
					got, err := l.Locks(ctx, tc.limit)
					if err != nil {
						t.Fatal(err)
					}
					if len(got) != len(tc.want) {
						t.Fatalf("Locks(%d) = %+v, want %d locks", tc.limit, got, len(tc.want))
					}
					for i := range got {
						check(t, got[i], tc.want[i])
					}
				})
			}
			t.Run("Held", func(t *testing.T) {
				for _, w := range held {
					got, ok, err := l.Held(ctx, w.k.Name())
					if err != nil || !ok {
						t.Fatalf("Held(%q) = %v, %v; want held", w.k.Name(), ok, err)
					}
					check(t, got, w)
				}
				for _, name := range []string{"c", "e", "never taken"} {
					if got, ok, err := l.Held(ctx, name); err != nil || ok || got != (rowlock.HeldLock{}) {
						t.Errorf("Held(%q) = %+v, %v, %v; want not held", name, got, ok, err)
					}
				}
			})
			t.Run("Lapsed", func(t *testing.T) {
				// The released and the expired rows; no waiter.
				if locks, waiters, err := l.Lapsed(ctx); err != nil || locks != 2 || waiters != 0 {
					t.Errorf("Lapsed = %d locks, %d waiters, %v; want 2 and 0", locks, waiters, err)
				}
			})
		})
	}
}

// TestDeleteDeadWaiters deletes waiters whose process stopped heartbeating,
// in batches, oldest first, through the Locker, and keeps a live fair
// waiter however often it runs with no grace.
func TestDeleteDeadWaiters(t *testing.T) {
	for _, shared := range testdb.AllTargets(t) {
		t.Run(shared.Name, func(t *testing.T) {
			tg := isolated(t, shared, nil).Target
			ctx := t.Context()
			// A short waiter TTL: its heartbeats (every TTL/3) must keep
			// the live waiter although each sweep has no grace.
			const waiterTTL = 300 * time.Millisecond
			l := newLocker(t, tg.DB, rowlock.WithWaiterTTL(waiterTTL))
			holder, err := l.TryAcquire(ctx, "busy")
			if err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() {
				k, err := l.Acquire(ctx, "busy", dblock.Fair())
				if err == nil {
					err = k.Release(context.Background())
				}
				waited <- err
			}()
			live := waitQueued(t, l, "busy", 1)[0]

			// Waiters of a process that died: queued, then silent.
			dead, err := queue.New(tg.DB, queue.WithDialect(tg.Dialect), queue.WithWaiterTTL(queue.MinWaiterTTL))
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := dead.Enqueue(ctx, "abandoned", lockinput.NewOwner(), 0); err != nil {
					t.Fatal(err)
				}
			}
			dead.Close()
			eventually(t, ctx, "three dead waiters", func() bool {
				_, n, err := l.Lapsed(ctx)
				return err == nil && n == 3
			})

			ws, err := l.AllWaiters(ctx, 10)
			if err != nil || len(ws) != 1 || ws[0].ID != live.ID || ws[0].Name != "busy" || ws[0].Position != 1 || ws[0].OwnerHost != lockinput.ProcessHost() {
				t.Fatalf("AllWaiters = %+v, %v; want the live waiter of busy only", ws, err)
			}
			for _, step := range []struct {
				grace time.Duration
				limit int
				want  int
			}{
				{time.Hour, 10, 0}, // dead for less than the grace
				{0, 2, 2},
				{0, 2, 1},
				{0, 2, 0},
			} {
				n, err := l.DeleteDeadWaiters(ctx, step.grace, step.limit)
				if err != nil || n != step.want {
					t.Fatalf("DeleteDeadWaiters(%v, %d) = %d, %v; want %d", step.grace, step.limit, n, err, step.want)
				}
			}
			// Past several of its TTLs, the live waiter keeps its place: a
			// deleted row would have been queued again with a new id.
			for deadline := time.Now().Add(3 * waiterTTL); time.Now().Before(deadline); {
				if _, err := l.DeleteDeadWaiters(ctx, 0, 10); err != nil {
					t.Fatal(err)
				}
				time.Sleep(waiterTTL / 10)
			}
			if ws := waitQueued(t, l, "busy", 1); ws[0].ID != live.ID {
				t.Fatalf("live waiter after the sweeps: %+v", ws)
			}
			if _, n, err := l.Lapsed(ctx); err != nil || n != 0 {
				t.Errorf("Lapsed after deleting: %d dead waiters, %v; want 0", n, err)
			}
			release(t, holder)
			if err := <-waited; err != nil {
				t.Fatalf("the live waiter, once the lock was released: %v", err)
			}
		})
	}
}
