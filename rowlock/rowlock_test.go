package rowlock_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

func TestTryAcquire(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			a, b := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)

			k, err := a.TryAcquire(ctx, name, dblock.Note("nightly report"))
			if err != nil {
				t.Fatalf("TryAcquire on a free lock: %v", err)
			}
			if k.Token() <= 0 || k.Name() != name || k.Err() != nil {
				t.Fatalf("fresh lock: token %d name %q err %v", k.Token(), k.Name(), k.Err())
			}
			row := readRow(t, tg, name)
			if !row.exists || row.token != k.Token() || row.holdCount != 1 || row.note != "nightly report" {
				t.Fatalf("row after acquire = %+v, want token %d, hold 1, note", row, k.Token())
			}
			for _, l := range []*rowlock.Locker{a, b} {
				if _, err := l.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
					t.Fatalf("TryAcquire of a held lock by another owner: %v, want ErrNotAcquired", err)
				}
			}
			release(t, k)
			// The row stays, free, carrying the name's token.
			if row := readRow(t, tg, name); !row.exists || row.holdCount != 0 || row.token != k.Token() {
				t.Fatalf("row after release = %+v, want it free with token %d", row, k.Token())
			}
			if !errors.Is(k.Err(), dblock.ErrReleased) {
				t.Fatalf("Err after release = %v", k.Err())
			}
			select {
			case <-k.Done():
			default:
				t.Fatal("Done open after release")
			}
			if err := k.Release(ctx); !errors.Is(err, dblock.ErrNotHeld) {
				t.Fatalf("second Release = %v, want ErrNotHeld", err)
			}
			if err := k.Refresh(ctx); !errors.Is(err, dblock.ErrNotHeld) {
				t.Fatalf("Refresh after Release = %v, want ErrNotHeld", err)
			}
			k2, err := b.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire after release: %v", err)
			}
			if k2.Token() <= k.Token() {
				t.Fatalf("token after release %d, not above %d", k2.Token(), k.Token())
			}
			release(t, k2)
		})
	}
}

func TestReentrant(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l, other := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)

			outer, err := l.Acquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			// The lock's context carries the owner: acquiring with it
			// re-enters, from this Locker or another one.
			inner, err := other.Acquire(outer.Context(), name)
			if err != nil {
				t.Fatalf("reentrant Acquire: %v", err)
			}
			if inner.Token() != outer.Token() {
				t.Fatalf("reentrant token %d, want %d", inner.Token(), outer.Token())
			}
			// An explicit owner id works the same across goroutines.
			ownerCtx := dblock.WithOwner(ctx, "worker-7")
			if _, err := l.TryAcquire(ownerCtx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("other owner: %v, want ErrNotAcquired", err)
			}
			if got := readRow(t, tg, name).holdCount; got != 2 {
				t.Fatalf("hold count %d, want 2", got)
			}
			release(t, inner)
			if row := readRow(t, tg, name); !row.exists || row.holdCount != 1 {
				t.Fatalf("after inner release: %+v, want the row with hold count 1", row)
			}
			if _, err := l.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("stranger after inner release: %v, want ErrNotAcquired", err)
			}
			release(t, outer)
			if row := readRow(t, tg, name); row.holdCount != 0 {
				t.Fatalf("row after the last hold was released = %+v, want hold count 0", row)
			}

			a, err := l.TryAcquire(ownerCtx, name)
			if err != nil {
				t.Fatal(err)
			}
			b, err := other.TryAcquire(dblock.WithOwner(ctx, "worker-7"), name)
			if err != nil {
				t.Fatalf("same WithOwner id from another context: %v", err)
			}
			release(t, b)
			release(t, a)
		})
	}
}

// TestTokensOnlyGrow checks the fencing token across every way a lock
// changes hands: release, expiry takeover and deletion of the row by Sweep.
func TestTokensOnlyGrow(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			name := testdb.Name(t)
			sweep := func(k dblock.Lock) {
				release(t, k)
				expireNow(t, tg, name)
				sweepAll(t, ctx, l, 0, 100)
				if readRow(t, tg, name).exists {
					t.Fatal("a whole sweep left the lapsed row")
				}
			}
			steps := []struct {
				how  string
				free func(k dblock.Lock)
			}{
				{"release", func(k dblock.Lock) { release(t, k) }},
				{"expiry takeover", func(k dblock.Lock) { expireNow(t, tg, name) }},
				{"row swept", sweep},
				{"row swept again", sweep},
				{"release again", func(k dblock.Lock) { release(t, k) }},
			}
			var last int64
			var prev dblock.Lock
			for _, step := range steps {
				k, err := l.TryAcquire(ctx, name)
				if err != nil {
					t.Fatalf("before %s: %v", step.how, err)
				}
				if k.Token() <= last {
					t.Fatalf("token %d after %d: did not grow", k.Token(), last)
				}
				if prev != nil && prev.Err() == nil {
					// The previous holder lost its row; stop its renewals.
					_ = prev.Release(ctx)
				}
				last, prev = k.Token(), k
				step.free(k)
			}
			_ = prev.Release(ctx)
		})
	}
}

func TestExpiredLeaseIsTakenOverAndHolderLearns(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			a, b := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)
			old, err := a.TryAcquire(ctx, name, dblock.TTL(300*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			expireNow(t, tg, name)
			taker, err := b.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("takeover of an expired lease: %v", err)
			}
			if taker.Token() <= old.Token() {
				t.Fatalf("takeover token %d not above %d", taker.Token(), old.Token())
			}
			// The old holder's next renewal finds the row taken.
			waitDone(t, old, 10*time.Second)
			if !errors.Is(old.Err(), dblock.ErrLockLost) {
				t.Fatalf("old holder Err = %v, want ErrLockLost", old.Err())
			}
			if cause := context.Cause(old.Context()); !errors.Is(cause, dblock.ErrLockLost) {
				t.Fatalf("old holder context cause = %v", cause)
			}
			if err := old.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Release of a lost lock = %v, want ErrLockLost", err)
			}
			if row := readRow(t, tg, name); row.token != taker.Token() {
				t.Fatalf("old holder's release touched the new holder's row: %+v", row)
			}
			release(t, taker)
		})
	}
}

func TestAcquireWaits(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			a, b := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)
			held, err := a.Acquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}

			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			_, err = b.Acquire(short, name)
			if !errors.Is(err, dblock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Acquire past its deadline = %v, want ErrNotAcquired joined with DeadlineExceeded", err)
			}

			got := make(chan dblock.Lock, 1)
			errc := make(chan error, 1)
			go func() {
				k, err := b.Acquire(ctx, name)
				got <- k
				errc <- err
			}()
			release(t, held)
			k := <-got
			if err := <-errc; err != nil {
				t.Fatalf("waiting Acquire: %v", err)
			}
			if k.Token() <= held.Token() {
				t.Fatalf("token %d not above %d", k.Token(), held.Token())
			}
			release(t, k)
		})
	}
}

// TestHammer runs many goroutines on two Lockers against one name, a
// quarter of them fair. A shared counter proves no two ever hold it at once,
// and tokens only grow.
func TestHammer(t *testing.T) {
	goroutines, rounds := 32, 20 // 640 acquisitions
	if testing.Short() {
		goroutines, rounds = 8, 6
	}
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			lockers := []*rowlock.Locker{newLocker(t, tg.DB), newLocker(t, tg.DB)}
			name := testdb.Name(t)
			var inside atomic.Int32
			var mu sync.Mutex
			var lastToken int64
			acquisitions := 0
			var wg sync.WaitGroup
			errs := make(chan error, 3*goroutines*rounds)
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := lockers[g%len(lockers)]
					opts := []dblock.Option{dblock.TTL(5 * time.Second)}
					if g%4 == 3 {
						opts = append(opts, dblock.Fair())
					}
					for range rounds {
						k, err := l.Acquire(ctx, name, opts...)
						if err != nil {
							errs <- err
							return
						}
						if n := inside.Add(1); n != 1 {
							errs <- errors.New("two holders at once")
						}
						mu.Lock()
						if k.Token() <= lastToken {
							errs <- errors.New("token went backwards")
						}
						lastToken = k.Token()
						acquisitions++
						mu.Unlock()
						// Stay inside a while, so an overlapping holder would
						// be caught.
						runtime.Gosched()
						inside.Add(-1)
						if err := k.Release(ctx); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if acquisitions != goroutines*rounds {
				t.Fatalf("%d acquisitions, want %d", acquisitions, goroutines*rounds)
			}
		})
	}
}

func TestMinHoldAndNote(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			a, b := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)
			const minHold = 400 * time.Millisecond
			k, err := a.TryAcquire(ctx, name, dblock.MinHold(minHold), dblock.Note("cron: invoices"))
			if err != nil {
				t.Fatal(err)
			}
			firstAt := acquiredAtMicros(t, tg, name)
			if row := readRow(t, tg, name); row.note != "cron: invoices" {
				t.Fatalf("note = %q", row.note)
			}
			release(t, k)
			row := readRow(t, tg, name)
			if !row.exists || row.holdCount != 0 {
				t.Fatalf("row after early release = %+v, want it kept with hold count 0", row)
			}
			if _, err := b.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("TryAcquire within MinHold = %v, want ErrNotAcquired", err)
			}
			// Not even the same owner may take it again before MinHold.
			if _, err := a.TryAcquire(k.Context(), name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("same owner within MinHold = %v, want ErrNotAcquired", err)
			}
			next, err := b.Acquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			// By the database clock, the second hold began no earlier than
			// MinHold after the first.
			if gap := time.Duration(acquiredAtMicros(t, tg, name)-firstAt) * time.Microsecond; gap < minHold {
				t.Fatalf("second hold began %v after the first, within MinHold %v", gap, minHold)
			}
			release(t, next)
		})
	}
}

// TestSweep deletes lapsed and released rows but never a live lock, even
// one renewing while sweeps run, and a fresh row after a sweep gets a larger
// token than the swept one had.
func TestSweep(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			live, released := testdb.Name(t), testdb.Name(t)
			ttl := 300 * time.Millisecond
			if tg.Dialect == dblock.SQLite {
				// SQLite runs in this process, under the race detector,
				// sharing the CPU with the sweeps' loop: a renewal's
				// statement takes longer than a server's.
				ttl = time.Second
			}
			holder, err := l.TryAcquire(ctx, live, dblock.TTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			gone, err := l.TryAcquire(ctx, released)
			if err != nil {
				t.Fatal(err)
			}
			release(t, gone)
			// Sweep across several renewals of the live lock.
			deadline := time.Now().Add(max(time.Second, 3*ttl))
			for time.Now().Before(deadline) {
				sweepAll(t, ctx, l, 0, 1000)
			}
			if readRow(t, tg, released).exists {
				t.Fatal("released row not swept")
			}
			if err := holder.Err(); err != nil {
				t.Fatalf("live lock lost during sweeps: %v", err)
			}
			if row := readRow(t, tg, live); !row.exists || row.holdCount != 1 {
				t.Fatalf("live lock's row = %+v", row)
			}
			again, err := l.TryAcquire(ctx, released)
			if err != nil {
				t.Fatal(err)
			}
			if again.Token() <= gone.Token() {
				t.Fatalf("token after sweep %d, not above the swept row's %d", again.Token(), gone.Token())
			}
			release(t, again)
			release(t, holder)

			for _, bad := range []struct {
				grace time.Duration
				limit int
			}{{-time.Second, 10}, {0, 0}, {0, rowlock.MaxSweepBatch + 1}} {
				if _, _, err := l.Sweep(ctx, bad.grace, bad.limit, ""); !errors.Is(err, dblock.ErrInvalidOption) {
					t.Errorf("Sweep(%v, %d) = %v, want ErrInvalidOption", bad.grace, bad.limit, err)
				}
			}
		})
	}
}
