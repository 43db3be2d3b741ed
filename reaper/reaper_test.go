package reaper_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/reaper"
	"github.com/sqllock/sqllock/rowlock"
)

func TestNewRejectsBadInput(t *testing.T) {
	tg := testdb.AllTargets(t)[0]
	l := newLocker(t, tg.DB)
	if _, err := reaper.New(nil); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("New(nil locker) = %v, want ErrInvalidOption", err)
	}
	for _, c := range []struct {
		name string
		opt  reaper.Option
		want error
	}{
		{"nil option", nil, dblock.ErrInvalidOption},
		{"batch 0", reaper.WithBatchSize(0), dblock.ErrInvalidOption},
		{"batch too big", reaper.WithBatchSize(reaper.MaxBatchSize + 1), dblock.ErrInvalidOption},
		{"negative grace", reaper.WithGrace(-time.Second), dblock.ErrInvalidOption},
		{"bad schedule", reaper.WithSchedule("every minute"), dblock.ErrInvalidOption},
		{"empty schedule", reaper.WithSchedule(""), dblock.ErrInvalidOption},
		{"empty lock name", reaper.WithLockName(""), dblock.ErrInvalidName},
	} {
		if _, err := reaper.New(l, c.opt); !errors.Is(err, c.want) {
			t.Errorf("%s: New = %v, want %v", c.name, err, c.want)
		}
	}
	for _, spec := range []string{"@every 1m", "*/5 * * * *", "@hourly", "CRON_TZ=UTC 0 3 * * *"} {
		if _, err := reaper.New(l, reaper.WithSchedule(spec)); err != nil {
			t.Errorf("WithSchedule(%q): %v", spec, err)
		}
	}
}

// TestRunOnceKeepsLiveLocks sweeps again and again, with grace 0 and small
// batches, while holders renew short leases: lapsed rows and dead waiters
// go, and nothing live does, not even a row whose lease runs out during the
// sweeps before it has run out by the database clock.
func TestRunOnceKeepsLiveLocks(t *testing.T) {
	for _, shared := range testdb.AllTargets(t) {
		t.Run(shared.Name, func(t *testing.T) {
			tg := isolated(t, shared, false)
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			prefix := testdb.Name(t) + "/"

			seedLapsed(t, tg, prefix+"lapsed/", 3000, time.Hour)
			holders := make([]dblock.Lock, 10)
			for i := range holders {
				k, err := l.TryAcquire(ctx, fmt.Sprintf("%slive/%d", prefix, i), dblock.TTL(time.Second))
				if err != nil {
					t.Fatal(err)
				}
				holders[i] = k
			}
			// Released early under MinHold: free of holders, still taken.
			lingering, err := l.TryAcquire(ctx, prefix+"lingering", dblock.MinHold(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if err := lingering.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// Released: its row lapses at once and carries its token.
			freed, err := l.TryAcquire(ctx, prefix+"freed")
			if err != nil {
				t.Fatal(err)
			}
			if err := freed.Release(ctx); err != nil {
				t.Fatal(err)
			}
			insertWaiters(t, tg, prefix+"queue", 120, -time.Minute)
			insertWaiters(t, tg, prefix+"queue-live", 3, time.Hour)
			// A crashed holder whose lease is still running.
			ghost := prefix + "ghost"
			ghostStart := time.Now()
			insertLock(t, tg, ghost, 700*time.Millisecond)
			ghostLeft := time.Duration(count(t, tg, leaseLeftMicros(tg), ghost)) * time.Microsecond

			r := newReaper(t, l, reaper.WithGrace(0), reaper.WithBatchSize(50))
			var total reaper.Result
			runs := 0
			for deadline := time.Now().Add(2500 * time.Millisecond); time.Now().Before(deadline); runs++ {
				res, err := r.RunOnce(ctx)
				if err != nil {
					t.Fatalf("RunOnce: %v", err)
				}
				if res.Skipped {
					t.Fatal("RunOnce skipped with no other reaper")
				}
				total.Locks += res.Locks
				total.Waiters += res.Waiters
				// The database clock started the ghost's lease before
				// ghostStart+ghostLeft by the local clock, so it cannot have
				// ended earlier.
				if !lockExists(t, tg, ghost) && time.Since(ghostStart) < ghostLeft {
					t.Fatalf("ghost's row deleted %v after insert, its lease had %v left", time.Since(ghostStart), ghostLeft)
				}
			}
			t.Logf("%d sweeps; deleted %d lock rows and %d waiters", runs, total.Locks, total.Waiters)

			if n := rowsWithPrefix(t, tg, prefix+"lapsed/"); n != 0 {
				t.Errorf("%d lapsed rows left", n)
			}
			if lockExists(t, tg, ghost) {
				t.Error("ghost's row left after its lease ended")
			}
			if lockExists(t, tg, prefix+"freed") {
				t.Error("released row left")
			}
			if !lockExists(t, tg, prefix+"lingering") {
				t.Error("row under MinHold deleted")
			}
			if want := 3000 + 2; total.Locks != want {
				t.Errorf("deleted %d lock rows, want %d", total.Locks, want)
			}
			if n := waiters(t, tg, prefix+"queue"); n != 0 || total.Waiters != 120 {
				t.Errorf("dead waiters: %d left, %d deleted; want 0 and 120", n, total.Waiters)
			}
			if n := waiters(t, tg, prefix+"queue-live"); n != 3 {
				t.Errorf("%d live waiters left, want 3", n)
			}
			for _, k := range holders {
				if err := k.Err(); err != nil {
					t.Errorf("holder of %q lost its lock: %v", k.Name(), err)
				}
				if err := k.Release(ctx); err != nil {
					t.Errorf("Release(%q): %v", k.Name(), err)
				}
			}
			again, err := l.TryAcquire(ctx, prefix+"freed")
			if err != nil {
				t.Fatal(err)
			}
			if again.Token() <= freed.Token() {
				t.Errorf("token after reaping %d, not above %d", again.Token(), freed.Token())
			}
			_ = again.Release(ctx)
		})
	}
}

func leaseLeftMicros(tg testdb.Target) string {
	switch tg.Dialect {
	case dblock.MySQL:
		return `SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) FROM dblock_locks WHERE name = ?`
	case dblock.SQLite:
		return `SELECT expires_at - ` + sqliteNow + ` FROM dblock_locks WHERE name = ?`
	}
	return `SELECT (extract(epoch FROM expires_at - clock_timestamp()) * 1000000)::bigint FROM dblock_locks WHERE name = ?`
}

// TestGrace keeps rows and waiters that lapsed less than the grace ago.
func TestGrace(t *testing.T) {
	for _, shared := range testdb.AllTargets(t) {
		t.Run(shared.Name, func(t *testing.T) {
			tg := isolated(t, shared, false)
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			prefix := testdb.Name(t) + "/"
			seedLapsed(t, tg, prefix+"old/", 100, 2*time.Hour)
			seedLapsed(t, tg, prefix+"recent/", 100, 5*time.Second)
			insertWaiters(t, tg, prefix+"old-waiter", 5, -2*time.Hour)
			insertWaiters(t, tg, prefix+"recent-waiter", 5, -5*time.Second)

			// DefaultGrace (a minute), batches of 10: eleven batches each.
			res, err := newReaper(t, l, reaper.WithBatchSize(10)).RunOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := (reaper.Result{Locks: 100, Waiters: 5}); res != want {
				t.Errorf("RunOnce with the default grace = %+v, want %+v", res, want)
			}
			if n := rowsWithPrefix(t, tg, prefix+"recent/"); n != 100 {
				t.Errorf("%d of 100 rows within the grace left", n)
			}
			if n := waiters(t, tg, prefix+"recent-waiter"); n != 5 {
				t.Errorf("%d of 5 waiters within the grace left", n)
			}

			res, err = newReaper(t, l, reaper.WithGrace(0)).RunOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := (reaper.Result{Locks: 100, Waiters: 5}); res != want {
				t.Errorf("RunOnce with grace 0 = %+v, want %+v", res, want)
			}
		})
	}
}

// TestSkippedWhileAnotherReaperSweeps: a reaper whose lock is held elsewhere
// does nothing and says so, without an error.
func TestSkippedWhileAnotherReaperSweeps(t *testing.T) {
	for _, shared := range testdb.AllTargets(t) {
		t.Run(shared.Name, func(t *testing.T) {
			tg := isolated(t, shared, false)
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			prefix := testdb.Name(t) + "/"
			seedLapsed(t, tg, prefix, 10, time.Hour)
			r := newReaper(t, l)

			other, err := newLocker(t, tg.DB).TryAcquire(ctx, reaper.DefaultLockName)
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.RunOnce(ctx)
			if err != nil || res != (reaper.Result{Skipped: true}) {
				t.Fatalf("RunOnce while the reaper lock is held = %+v, %v; want skipped", res, err)
			}
			if n := rowsWithPrefix(t, tg, prefix); n != 10 {
				t.Fatalf("skipped run deleted rows: %d of 10 left", n)
			}
			if err := other.Release(ctx); err != nil {
				t.Fatal(err)
			}
			res, err = r.RunOnce(ctx)
			if err != nil || res.Skipped || res.Locks != 10 {
				t.Fatalf("RunOnce after release = %+v, %v; want 10 rows deleted", res, err)
			}
		})
	}
}

// TestOneReaperAtATime runs four replicas' reapers at once: their sweeps
// never overlap, and together they delete every row once.
func TestOneReaperAtATime(t *testing.T) {
	for _, shared := range testdb.AllTargets(t) {
		t.Run(shared.Name, func(t *testing.T) {
			tg := isolated(t, shared, false)
			ctx := t.Context()
			prefix := testdb.Name(t) + "/"
			const rows = 2000
			seedLapsed(t, tg, prefix, rows, time.Hour)

			var active, maxActive, skipped, deleted atomic.Int64
			var wg sync.WaitGroup
			for range 4 {
				// Each replica has its own Locker and pool.
				db := testdb.Open(t, tg, tg.DSN)
				r := newReaper(t, newLocker(t, db), reaper.WithBatchSize(20))
				reaper.SetSweepingHook(r, func(sweeping bool) {
					if !sweeping {
						active.Add(-1)
						return
					}
					n := active.Add(1)
					for m := maxActive.Load(); n > m && !maxActive.CompareAndSwap(m, n); m = maxActive.Load() {
					}
				})
				wg.Go(func() {
					for i := 0; i < 200 && deleted.Load() < rows; i++ {
						res, err := r.RunOnce(ctx)
						if err != nil {
							t.Errorf("RunOnce: %v", err)
							return
						}
						if res.Skipped {
							skipped.Add(1)
							time.Sleep(5 * time.Millisecond)
						}
						deleted.Add(int64(res.Locks))
					}
				})
			}
			wg.Wait()
			t.Logf("%d rows deleted, %d runs skipped", deleted.Load(), skipped.Load())
			if m := maxActive.Load(); m != 1 {
				t.Errorf("%d sweeps ran at once, want 1", m)
			}
			if n := rowsWithPrefix(t, tg, prefix); n != 0 || deleted.Load() != rows {
				t.Errorf("%d rows left, %d deleted; want 0 and %d", n, deleted.Load(), rows)
			}
		})
	}
}

func TestRunOnceErrors(t *testing.T) {
	for _, shared := range testdb.AllTargets(t) {
		t.Run(shared.Name, func(t *testing.T) {
			t.Run("canceled", func(t *testing.T) {
				l := newLocker(t, shared.DB)
				// A lock name of its own: this reaper must not skip.
				r := newReaper(t, l, reaper.WithLockName(testdb.Name(t)))
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				res, err := r.RunOnce(ctx)
				if !errors.Is(err, context.Canceled) || res.Skipped {
					t.Errorf("RunOnce(canceled) = %+v, %v; want context.Canceled", res, err)
				}
			})
			t.Run("no tables", func(t *testing.T) {
				tg := isolated(t, shared, true)
				r := newReaper(t, newLocker(t, tg.DB))
				if _, err := r.RunOnce(t.Context()); !errors.Is(err, dblock.ErrSchemaMissing) {
					t.Errorf("RunOnce without tables = %v, want ErrSchemaMissing", err)
				}
			})
		})
	}
}

// syncBuffer is a bytes.Buffer for a logger written from other goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestStartStop(t *testing.T) {
	for _, shared := range testdb.AllTargets(t) {
		t.Run(shared.Name, func(t *testing.T) {
			tg := isolated(t, shared, false)
			prefix := testdb.Name(t) + "/"
			seedLapsed(t, tg, prefix, 300, time.Hour)
			// The reaper logs to its Locker's logger.
			var logs syncBuffer
			locker, err := rowlock.New(tg.DB, rowlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = locker.Close() })
			r := newReaper(t, locker, reaper.WithSchedule("@every 1s"))
			if ctx := r.Stop(); ctx.Err() == nil {
				t.Error("Stop before Start: context not done")
			}
			r.Start()
			r.Start() // no-op
			// Wait for the sweep's summary, not for the rows to go: the
			// rows are gone once the lock phase commits, while the sweep
			// still has its waiter phase to run, and stopping it then would
			// (rightly) log "stopped early".
			const summary = `msg="reaper: swept" locks=300`
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(logs.String(), summary) {
				if time.Now().After(deadline) {
					t.Fatalf("scheduled reaper did not finish a sweep of 300 rows within 10s; log:\n%s", logs.String())
				}
				time.Sleep(100 * time.Millisecond)
			}
			if n := rowsWithPrefix(t, tg, prefix); n != 0 {
				t.Errorf("%d lapsed rows left after the sweep, want 0", n)
			}
			waitDone(t, r.Stop(), 5*time.Second)
			if ctx := r.Stop(); ctx.Err() == nil {
				t.Error("second Stop: context not done")
			}
		})
	}
}

// TestStopEndsSweepInFlight stops the schedule during a long sweep: the
// sweep ends after its current batch, and Stop's context says when.
func TestStopEndsSweepInFlight(t *testing.T) {
	for _, shared := range testdb.AllTargets(t) {
		t.Run(shared.Name, func(t *testing.T) {
			tg := isolated(t, shared, false)
			prefix := testdb.Name(t) + "/"
			const rows = 20000
			seedLapsed(t, tg, prefix, rows, time.Hour)
			r := newReaper(t, newLocker(t, tg.DB),
				reaper.WithSchedule("@every 1s"), reaper.WithGrace(0), reaper.WithBatchSize(10))
			started := make(chan struct{}, 1)
			reaper.SetSweepingHook(r, func(sweeping bool) {
				if sweeping {
					select {
					case started <- struct{}{}:
					default:
					}
				}
			})
			r.Start()
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("scheduled sweep did not start within 10s")
			}
			time.Sleep(200 * time.Millisecond)
			stopped := time.Now()
			waitDone(t, r.Stop(), 5*time.Second)
			left := rowsWithPrefix(t, tg, prefix)
			t.Logf("Stop's context done %v after Stop; %d of %d rows left", time.Since(stopped), left, rows)
			if left == 0 || left == rows {
				t.Errorf("%d of %d rows left: want the sweep cut short after it began", left, rows)
			}
		})
	}
}

func waitDone(t *testing.T, ctx context.Context, within time.Duration) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(within):
		t.Fatalf("Stop's context not done within %v", within)
	}
}

// TestSweepsIdleSemaphores: the limits recorded for semaphores no one
// holds a permit of go; one in use stays.
func TestSweepsIdleSemaphores(t *testing.T) {
	for _, shared := range testdb.Targets(t) {
		t.Run(shared.Name, func(t *testing.T) {
			tg := isolated(t, shared, false)
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			sem, err := l.Semaphore(2)
			if err != nil {
				t.Fatal(err)
			}
			busy, err := sem.TryAcquire(ctx, "busy")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = busy.Release(context.Background()) }()
			for i := range 3 {
				k, err := sem.TryAcquire(ctx, fmt.Sprintf("idle-%d", i))
				if err != nil {
					t.Fatal(err)
				}
				if err := k.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			res, err := newReaper(t, l, reaper.WithGrace(0), reaper.WithBatchSize(2)).RunOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if res.Semaphores != 3 {
				t.Errorf("RunOnce = %+v, want the 3 idle semaphores' limits deleted", res)
			}
			if n := count(t, tg, `SELECT count(*) FROM dblock_semaphores WHERE name = ?`, "busy"); n != 1 {
				t.Errorf("the limit of the semaphore in use: %d rows, want 1", n)
			}
		})
	}
}
