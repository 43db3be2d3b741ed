package rowlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestCloseWithFairWaitersInFlight: fair waiters still in Acquire when their
// Locker is closed delete their rows when they leave the queue, whether
// they got the lock or gave up. A row left behind would hold up the queue
// until it lapsed (the waiter TTL, 10 s here).
func TestCloseWithFairWaitersInFlight(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l, other := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)
			holder := mustTry(t, other, name)
			// Released below; this only keeps a failed run from leaving it
			// renewing until the package ends.
			defer func() { _ = holder.Release(context.Background()) }()

			winnerDone := make(chan error, 1)
			go func() {
				k, err := l.Acquire(ctx, name, dblock.Fair())
				if err == nil {
					err = k.Release(context.Background())
				}
				winnerDone <- err
			}()
			waitQueued(t, other, name, 1)
			quitCtx, quit := context.WithCancel(ctx)
			defer quit()
			quitterDone := make(chan error, 1)
			go func() {
				_, err := l.Acquire(quitCtx, name, dblock.Fair())
				quitterDone <- err
			}()
			waitQueued(t, other, name, 2)

			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			quit()
			if err := <-quitterDone; !errors.Is(err, context.Canceled) {
				t.Fatalf("canceled waiter: %v", err)
			}
			if ws, err := other.Waiters(ctx, name); err != nil || len(ws) != 1 {
				t.Fatalf("after the canceled waiter left: %+v, %v; want only the first waiter", ws, err)
			}
			release(t, holder)
			if err := <-winnerDone; err != nil {
				t.Fatalf("first waiter: %v", err)
			}
			if ws, err := other.Waiters(ctx, name); err != nil || len(ws) != 0 {
				t.Fatalf("after the first waiter got the lock: %+v, %v; want none", ws, err)
			}
		})
	}
}

// TestLockHeldAcrossClose: a Locker's Close refuses new acquisitions, but a
// lock held across it is still renewed, refreshed and released (its
// statements then run unprepared on MySQL), and another Locker gets it.
func TestLockHeldAcrossClose(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l, other := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)
			k := mustTry(t, l, name)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := l.TryAcquire(ctx, testdb.Name(t)); !errors.Is(err, dblock.ErrClosed) {
				t.Fatalf("TryAcquire after Close = %v, want ErrClosed", err)
			}
			if err := k.Refresh(ctx); err != nil {
				t.Fatalf("Refresh after Close: %v", err)
			}
			if _, err := other.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("another Locker took a lock held across Close: %v", err)
			}
			release(t, k)
			release(t, mustTry(t, other, name))
		})
	}
}
