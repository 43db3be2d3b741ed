package reaper_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/reaper"
	"github.com/sqllock/sqllock/rowlock"
)

const (
	loadRows      = 100000
	loadAcquirers = 8
	loadBaseline  = 3 * time.Second
)

// TestSweepUnderLoad sweeps 100k lapsed rows while acquirers take and
// release locks of their own, and reports the acquirers' latency with and
// without the sweep running. It asserts what the sweep did, not how fast:
// the figures depend on the machine (see the log, run with -v).
func TestSweepUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("100k-row sweep under load; skipped with -short")
	}
	for _, shared := range testdb.Targets(t) {
		t.Run(shared.Name, func(t *testing.T) {
			tg := isolated(t, shared, false)
			ctx := t.Context()
			prefix := testdb.Name(t) + "/"

			seeded := time.Now()
			seedLapsed(t, tg, prefix+"lapsed/", loadRows, time.Hour)
			t.Logf("seeded %d lapsed rows in %v", loadRows, time.Since(seeded).Round(time.Millisecond))

			l := newLocker(t, tg.DB)
			// Held all along, renewing (every TTL/3, about three times
			// during the sweep): its row must survive. The TTL is long
			// enough that the loaded machine cannot delay a renewal past it,
			// which would make the holder give the lock up on its own.
			live, err := l.TryAcquire(ctx, prefix+"live", dblock.TTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			// The default grace keeps the acquirers' own released rows, which
			// are reused at once, as in production.
			r := newReaper(t, l)

			base := acquireLoad(t, l, prefix+"acquirer/", func() { time.Sleep(loadBaseline) })
			var res reaper.Result
			var sweepTime time.Duration
			during := acquireLoad(t, l, prefix+"acquirer/", func() {
				started := time.Now()
				res, err = r.RunOnce(ctx)
				sweepTime = time.Since(started)
			})
			if err != nil {
				t.Fatalf("RunOnce: %v", err)
			}

			t.Logf("sweep: %d rows in %v (%.0f rows/s) in batches of %d, %d acquirers on %d connections max",
				res.Locks, sweepTime.Round(time.Millisecond), float64(res.Locks)/sweepTime.Seconds(),
				reaper.DefaultBatchSize, loadAcquirers, tg.DB.Stats().MaxOpenConnections)
			t.Logf("TryAcquire  without sweep: %s", base.acquire)
			t.Logf("TryAcquire  during sweep:  %s", during.acquire)
			t.Logf("Release     without sweep: %s", base.release)
			t.Logf("Release     during sweep:  %s", during.release)

			if res.Skipped || res.Locks != loadRows {
				t.Errorf("RunOnce = %+v, want %d rows deleted", res, loadRows)
			}
			if n := rowsWithPrefix(t, tg, prefix+"lapsed/"); n != 0 {
				t.Errorf("%d lapsed rows left", n)
			}
			if !lockExists(t, tg, live.Name()) {
				t.Errorf("the sweep deleted the row of the live lock %q", live.Name())
			}
			if err := live.Err(); err != nil {
				t.Errorf("live lock lost during the sweep: %v", err)
			}
			if err := live.Release(ctx); err != nil {
				t.Errorf("Release of the live lock: %v", err)
			}
		})
	}
}

// latencies summarizes one operation's latencies.
type latencies []time.Duration

func (ls latencies) String() string {
	if len(ls) == 0 {
		return "no samples"
	}
	s := slices.Clone(ls)
	slices.Sort(s)
	pct := func(p float64) time.Duration {
		i := int(float64(len(s))*p+0.999999) - 1
		return s[max(0, min(i, len(s)-1))].Round(10 * time.Microsecond)
	}
	return fmt.Sprintf("n=%d p50=%v p99=%v max=%v", len(s), pct(0.50), pct(0.99), s[len(s)-1].Round(10*time.Microsecond))
}

type loadResult struct{ acquire, release latencies }

// acquireLoad runs loadAcquirers goroutines that each TryAcquire and
// Release a name of their own as fast as they can while during runs, and
// returns their latencies. Every TryAcquire must succeed: nobody else
// holds those names.
func acquireLoad(t *testing.T, l *rowlock.Locker, prefix string, during func()) loadResult {
	t.Helper()
	ctx := t.Context()
	var stop atomic.Bool
	var mu sync.Mutex
	var out loadResult
	var wg sync.WaitGroup
	for i := range loadAcquirers {
		name := fmt.Sprintf("%s%d", prefix, i)
		wg.Go(func() {
			var acq, rel latencies
			defer func() {
				mu.Lock()
				out.acquire = append(out.acquire, acq...)
				out.release = append(out.release, rel...)
				mu.Unlock()
			}()
			for !stop.Load() {
				start := time.Now()
				k, err := l.TryAcquire(ctx, name, dblock.TTL(10*time.Second))
				acquired := time.Now()
				if err != nil {
					if errors.Is(err, context.Canceled) {
						return
					}
					t.Errorf("TryAcquire(%q) of a free lock: %v", name, err)
					return
				}
				acq = append(acq, acquired.Sub(start))
				if err := k.Release(ctx); err != nil {
					t.Errorf("Release(%q): %v", name, err)
					return
				}
				rel = append(rel, time.Since(acquired))
			}
		})
	}
	during()
	stop.Store(true)
	wg.Wait()
	return out
}
