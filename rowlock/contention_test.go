package rowlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// injected is more deadlocks in a row than one round of
// lockkit.RetryContention absorbs.
const injected = lockkit.MaxContentionRetries + 5

// noContention fails the test if err carries a contention error: those must
// never reach callers.
func noContention(t testing.TB, what string, err error) {
	t.Helper()
	if lockkit.ClassifyError(err) == lockkit.ClassContention {
		t.Fatalf("%s returned a contention error: %v", what, err)
	}
}

// TestContentionNeverReachesCallers injects deadlocks, more in a row than
// one round of retries absorbs, into each statement path and checks that
// callers get the outcome, never the contention error.
func TestContentionNeverReachesCallers(t *testing.T) {
	cases := []struct {
		name  string
		run   func(t *testing.T, ft faultTarget, l *rowlock.Locker, name string)
		fires int // injected unless set; -1: as many as ran before ctx ended
	}{
		{name: "Release", run: func(t *testing.T, ft faultTarget, l *rowlock.Locker, name string) {
			k := mustTry(t, l, name)
			ft.arm(t, "dblock_locks", "UPDATE", injected)
			err := k.Release(t.Context())
			noContention(t, "Release", err)
			if err != nil {
				t.Fatalf("Release: %v", err)
			}
			if row := readRow(t, ft.Target, name); row.holdCount != 0 {
				t.Fatalf("row after Release: %+v", row)
			}
		}},
		{name: "Refresh", run: func(t *testing.T, ft faultTarget, l *rowlock.Locker, name string) {
			k := mustTry(t, l, name)
			defer release(t, k)
			ft.arm(t, "dblock_locks", "UPDATE", injected)
			err := k.Refresh(t.Context())
			noContention(t, "Refresh", err)
			if err != nil {
				t.Fatalf("Refresh: %v", err)
			}
		}},
		{name: "Sweep", run: func(t *testing.T, ft faultTarget, l *rowlock.Locker, name string) {
			release(t, mustTry(t, l, name))
			ft.arm(t, "dblock_locks", "DELETE", injected)
			n, _, err := l.Sweep(t.Context(), 0, 100, "")
			noContention(t, "Sweep", err)
			if err != nil || n < 1 || readRow(t, ft.Target, name).exists {
				t.Fatalf("Sweep = %d, %v; row %+v", n, err, readRow(t, ft.Target, name))
			}
		}},
		{name: "TryAcquire", run: func(t *testing.T, ft faultTarget, l *rowlock.Locker, name string) {
			// An exhausted budget means "not acquired".
			release(t, mustTry(t, l, name))
			ft.arm(t, "dblock_locks", "UPDATE", injected)
			if _, err := l.TryAcquire(t.Context(), name); !errors.Is(err, dblock.ErrNotAcquired) {
				noContention(t, "TryAcquire", err)
				t.Fatalf("TryAcquire through contention = %v, want ErrNotAcquired", err)
			}
		}, fires: lockkit.MaxContentionRetries + 1},
		{name: "TryAcquire whose context ends", run: func(t *testing.T, ft faultTarget, l *rowlock.Locker, name string) {
			// The retries pause 1, 2, 3... ms between attempts (36 ms in
			// all): the context ends among them, and the last error is a
			// deadlock. The caller learns that its context ended.
			release(t, mustTry(t, l, name))
			ft.arm(t, "dblock_locks", "UPDATE", injected)
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Millisecond)
			defer cancel()
			_, err := l.TryAcquire(ctx, name)
			noContention(t, "TryAcquire", err)
			if !errors.Is(err, dblock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("TryAcquire whose context ended in contention = %v, want ErrNotAcquired and DeadlineExceeded", err)
			}
		}, fires: -1},
		{name: "Acquire", run: func(t *testing.T, ft faultTarget, l *rowlock.Locker, name string) {
			// Acquire keeps waiting through it. A fresh name: the row's
			// insert meets the deadlocks.
			ft.arm(t, "dblock_locks", "INSERT", injected)
			k, err := l.Acquire(t.Context(), name)
			noContention(t, "Acquire", err)
			if err != nil {
				t.Fatalf("Acquire: %v", err)
			}
			release(t, k)
		}},
		{name: "fair Acquire enqueuing", run: func(t *testing.T, ft faultTarget, l *rowlock.Locker, name string) {
			holder := mustTry(t, l, name)
			ft.arm(t, "dblock_waiters", "INSERT", injected)
			got := make(chan error, 1)
			go func() {
				k, err := l.Acquire(t.Context(), name, dblock.Fair())
				if err == nil {
					err = k.Release(context.Background())
				}
				got <- err
			}()
			for queued := false; !queued; {
				select {
				case err := <-got:
					noContention(t, "fair Acquire", err)
					t.Fatalf("fair Acquire ended before it queued: %v", err)
				case <-time.After(5 * time.Millisecond):
				}
				ws, err := l.Waiters(t.Context(), name)
				if err != nil {
					t.Fatal(err)
				}
				queued = len(ws) == 1
			}
			release(t, holder)
			if err := <-got; err != nil {
				t.Fatalf("fair Acquire: %v", err)
			}
		}},
		{name: "fair Acquire leaving", run: func(t *testing.T, ft faultTarget, l *rowlock.Locker, name string) {
			holder := mustTry(t, l, name)
			defer release(t, holder)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			got := make(chan error, 1)
			go func() {
				_, err := l.Acquire(ctx, name, dblock.Fair())
				got <- err
			}()
			waitQueued(t, l, name, 1)
			ft.arm(t, "dblock_waiters", "DELETE", injected)
			cancel()
			err := <-got
			noContention(t, "canceled fair Acquire", err)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("canceled fair Acquire = %v", err)
			}
			// Its heartbeat would keep a lingering row live for the
			// waiter TTL (10 s): the row must be gone now.
			if ws, err := l.Waiters(t.Context(), name); err != nil || len(ws) != 0 {
				t.Fatalf("waiters after the canceled one left: %+v, %v", ws, err)
			}
		}},
	}
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ft := withFaults(t, tg)
			l := newLocker(t, ft.DB)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					defer ft.disarm(t)
					c.run(t, ft, l, testdb.Name(t))
					want := injected
					if c.fires != 0 {
						want = c.fires
					}
					if n := ft.fired(t); want >= 0 && n != want {
						t.Fatalf("%d injected deadlocks fired, want %d: the path under test did not meet them", n, want)
					}
				})
			}
		})
	}
}

// mustTry takes name with TryAcquire or fails the test.
func mustTry(t testing.TB, l *rowlock.Locker, name string) dblock.Lock {
	t.Helper()
	k, err := l.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("TryAcquire(%q): %v", name, err)
	}
	return k
}
