package cronguard_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sqllock/sqllock/cronguard"
	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/leader"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

func TestMain(m *testing.M) {
	// A guard starts no goroutines that outlive a run; the locks it takes
	// stop theirs on Release.
	testdb.Main(m)
}

// mustGuard is cronguard.New that fails the test on an error.
func mustGuard(t testing.TB, l dblock.Locker, name string, opts ...cronguard.Option) cron.JobWrapper {
	t.Helper()
	w, err := cronguard.New(l, name, opts...)
	if err != nil {
		t.Fatalf("cronguard.New: %v", err)
	}
	return w
}

// newTestLocker returns a rowlock Locker on db, closed when the test ends.
func newTestLocker(t testing.TB, db *sql.DB) *rowlock.Locker {
	t.Helper()
	l, err := rowlock.New(db)
	if err != nil {
		t.Fatalf("rowlock.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// offsetSchedule fires offset after (or before, when negative) the inner
// schedule: a replica whose scheduler runs late or early.
type offsetSchedule struct {
	inner  cron.Schedule
	offset time.Duration
}

func (s offsetSchedule) Next(t time.Time) time.Time {
	return s.inner.Next(t.Add(-s.offset)).Add(s.offset)
}

// TestGuardThreeReplicasRunEachTickOnce runs three robfig/cron
// schedulers, each with its own Locker, firing the same every-second job with
// offsets of 0, +300 ms and -300 ms. Every tick any of them fired must have
// run exactly once.
func TestGuardThreeReplicasRunEachTickOnce(t *testing.T) {
	duration := 10 * time.Second
	if testing.Short() {
		duration = 3 * time.Second
	}
	offsets := []time.Duration{0, 300 * time.Millisecond, -300 * time.Millisecond}
	every, err := cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow).Parse("* * * * * *")
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			name := testdb.Name(t)
			var (
				mu       sync.Mutex
				fired    = map[time.Time]int{} // tick -> replicas that fired it
				ran      = map[time.Time]int{} // tick -> runs of the job
				problems []string
			)
			report := func(format string, args ...any) {
				mu.Lock()
				problems = append(problems, fmt.Sprintf(format, args...))
				mu.Unlock()
			}
			var crons []*cron.Cron
			for _, offset := range offsets {
				// The tick as the replica's schedule meant it, independent of
				// the guard's own attribution, taken when the replica fires:
				// by the time the job runs, the acquire may have taken long
				// enough (a loaded CI machine) to cross into the next second.
				// A replica runs one tick at a time so that the job reads the
				// tick its own firing recorded; a fire while the previous run
				// is still going is skipped and not counted, as
				// cron.SkipIfStillRunning would (blocking instead would delay
				// the guard's own reading of the clock).
				var (
					replicaMu   sync.Mutex
					firedAtTick time.Time
				)
				recordFire := func(j cron.Job) cron.Job {
					return cron.FuncJob(func() {
						tick := time.Now().Add(-offset).Round(time.Second).UTC()
						if !replicaMu.TryLock() {
							t.Logf("replica %v: tick %v skipped: its previous run is still going", offset, tick.Format(time.TimeOnly))
							return
						}
						defer replicaMu.Unlock()
						mu.Lock()
						fired[tick]++
						mu.Unlock()
						firedAtTick = tick
						j.Run()
					})
				}
				job := cronguard.Job(cronguard.ContextJobFunc(func(ctx context.Context) {
					tick := firedAtTick // set by recordFire, which holds replicaMu
					if guardTick, ok := cronguard.Tick(ctx); !ok || !guardTick.Equal(tick) {
						report("replica %v: guard attributed the run to %v (ok %v), scheduled tick %v", offset, guardTick, ok, tick)
					}
					if ctx.Err() != nil {
						report("replica %v: job context already done: %v", offset, context.Cause(ctx))
					}
					mu.Lock()
					ran[tick]++
					mu.Unlock()
				}))
				c := cron.New(cron.WithSeconds())
				c.Schedule(offsetSchedule{inner: every, offset: offset},
					cron.NewChain(recordFire, mustGuard(t, newTestLocker(t, tg.DB), name)).Then(job))
				crons = append(crons, c)
			}
			for _, c := range crons {
				c.Start()
			}
			time.Sleep(duration)
			var stopped []context.Context
			for _, c := range crons {
				stopped = append(stopped, c.Stop())
			}
			for _, done := range stopped {
				<-done.Done() // running jobs have finished
			}

			mu.Lock()
			defer mu.Unlock()
			for _, p := range problems {
				t.Error(p)
			}
			// The edges may see fewer replicas; the middle must see all three.
			testdb.CheckEachTickOnce(t, fired, ran, len(offsets), int(duration/time.Second)-3)
		})
	}
}

// TestGuardSkipsTakenTick: a second replica firing the same tick after
// the first finished skips it (MinHold), and a held single name skips too.
func TestGuardSkipsTakenTick(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			name := testdb.Name(t)
			var runs atomic.Int32
			var ticks []time.Time
			job := cronguard.Job(cronguard.ContextJobFunc(func(ctx context.Context) {
				runs.Add(1)
				tick, ok := cronguard.Tick(ctx)
				if !ok {
					t.Error("CronTick missing in a per-tick run")
				}
				ticks = append(ticks, tick)
			}))
			// A minute tick: both runs below fall in the same one unless
			// they straddle a half-minute, which the loop retries.
			opts := []cronguard.Option{cronguard.WithTick(time.Minute)}
			for attempt := 0; ; attempt++ {
				runs.Store(0)
				ticks = nil
				before := time.Now().Round(time.Minute)
				mustGuard(t, newTestLocker(t, tg.DB), name, opts...)(job).Run()
				mustGuard(t, newTestLocker(t, tg.DB), name, opts...)(job).Run()
				if time.Now().Round(time.Minute).Equal(before) {
					// Checked before indexing: a guard that never ran the job
					// must fail the test, not panic it.
					if len(ticks) != 1 {
						t.Fatalf("two replicas firing one tick ran the job %d times, want 1", len(ticks))
					}
					if !ticks[0].Equal(before.UTC()) {
						t.Errorf("CronTick = %v, want %v", ticks[0], before.UTC())
					}
					break
				}
				if attempt == 3 {
					t.Fatal("could not run twice within one tick")
				}
				name = testdb.Name(t)
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("two replicas firing one tick ran the job %d times, want 1", n)
			}

			// Single-name mode: skipped while someone holds the name.
			single := testdb.Name(t)
			holder, err := newTestLocker(t, tg.DB).TryAcquire(t.Context(), single)
			if err != nil {
				t.Fatal(err)
			}
			var plainRuns atomic.Int32
			plain := cron.FuncJob(func() { plainRuns.Add(1) })
			guarded := mustGuard(t, newTestLocker(t, tg.DB), single, cronguard.WithTick(0), cronguard.WithMinHold(0))(plain)
			guarded.Run()
			if n := plainRuns.Load(); n != 0 {
				t.Fatalf("ran %d times while the lock was held elsewhere", n)
			}
			if err := holder.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			guarded.Run()
			guarded.Run() // MinHold 0: released at once, so this runs too
			if n := plainRuns.Load(); n != 2 {
				t.Fatalf("ran %d times after the lock was freed, want 2", n)
			}
		})
	}
}

// TestGuardWaitSerializes: with WithWait every replica runs, one at a
// time.
func TestGuardWaitSerializes(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			name := testdb.Name(t)
			var active, maxActive, runs atomic.Int32
			job := cron.FuncJob(func() {
				n := active.Add(1)
				for {
					m := maxActive.Load()
					if n <= m || maxActive.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(100 * time.Millisecond)
				active.Add(-1)
				runs.Add(1)
			})
			var wg sync.WaitGroup
			for range 3 {
				guarded := mustGuard(t, newTestLocker(t, tg.DB), name,
					cronguard.WithTick(0), cronguard.WithMinHold(0), cronguard.WithWait(20*time.Second))(job)
				wg.Go(guarded.Run)
			}
			wg.Wait()
			if runs.Load() != 3 || maxActive.Load() != 1 {
				t.Fatalf("runs %d, most at once %d; want 3 runs one at a time", runs.Load(), maxActive.Load())
			}
		})
	}
}

// TestGuardCancelsJobWhenLockLost cuts the guard's database connections
// while the job runs: the job's context is canceled with ErrLockLost.
func TestGuardCancelsJobWhenLockLost(t *testing.T) {
	const ttl = time.Second
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			proxy := testdb.NewProxy(t, tg.HostPort())
			l := newTestLocker(t, testdb.Open(t, tg, tg.DSNVia(proxy.Addr())))
			started := make(chan struct{})
			var cause error
			job := cronguard.Job(cronguard.ContextJobFunc(func(ctx context.Context) {
				close(started)
				select {
				case <-ctx.Done():
					cause = context.Cause(ctx)
				case <-time.After(20 * ttl):
				}
			}))
			done := make(chan struct{})
			go func() {
				defer close(done)
				mustGuard(t, l, testdb.Name(t), cronguard.WithTTL(ttl))(job).Run()
			}()
			select {
			case <-started:
			case <-time.After(30 * time.Second):
				t.Fatal("job never started")
			}
			proxy.Cut()
			<-done
			if !errors.Is(cause, dblock.ErrLockLost) {
				t.Fatalf("job context cause = %v, want ErrLockLost", cause)
			}
		})
	}
}

// TestGuardReleasesAfterPanicAndStopsWithContext: a panicking job does
// not keep the lock, and WithContext's end cancels a running job.
func TestGuardReleasesAfterPanicAndStopsWithContext(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			name := testdb.Name(t)
			l := newTestLocker(t, tg.DB)
			panicky := mustGuard(t, l, name, cronguard.WithTick(0), cronguard.WithMinHold(0))(cron.FuncJob(func() { panic("boom") }))
			func() {
				defer func() {
					if r := recover(); r != "boom" {
						t.Fatalf("recovered %v, want the job's panic", r)
					}
				}()
				panicky.Run()
			}()
			k, err := newTestLocker(t, tg.DB).TryAcquire(t.Context(), name)
			if err != nil {
				t.Fatalf("lock still held after the job panicked: %v", err)
			}
			if err := k.Release(t.Context()); err != nil {
				t.Fatal(err)
			}

			ctx, cancel := context.WithCancel(t.Context())
			var cause error
			job := cronguard.Job(cronguard.ContextJobFunc(func(ctx context.Context) {
				cancel()
				select {
				case <-ctx.Done():
					cause = ctx.Err()
				case <-time.After(20 * time.Second):
				}
			}))
			mustGuard(t, l, name, cronguard.WithContext(ctx))(job).Run()
			if !errors.Is(cause, context.Canceled) {
				t.Fatalf("job context after WithContext ended: %v, want canceled", cause)
			}
		})
	}
}

// TestGuardRefusesWhatTheLockerRefuses: a forupdate Locker refuses a
// positive MinHold at every acquisition and keeps a row for every name. A
// guard over it with the defaults (per-tick names, MinHold one tick) would
// never run the job and, its logger discarding, never say why; so
// cronguard.New refuses it, naming the option. What the Locker accepts
// (one name, no MinHold) runs the job under the lock, and leaves no
// per-tick rows.
func TestGuardRefusesWhatTheLockerRefuses(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			fu, err := forupdate.New(tg.DB)
			if err != nil {
				t.Fatal(err)
			}
			name := testdb.Name(t)
			refused := []struct {
				what   string
				opts   []cronguard.Option
				option string
			}{
				{"the defaults: per-tick names and MinHold", nil, "WithTick"},
				{"per-tick names without MinHold", []cronguard.Option{cronguard.WithMinHold(0)}, "WithTick"},
				{"one name, the default MinHold", []cronguard.Option{cronguard.WithTick(0)}, "MinHold"},
				{"one name, a MinHold", []cronguard.Option{cronguard.WithTick(0), cronguard.WithMinHold(time.Minute)}, "MinHold"},
				{"waiting, one name, a MinHold", []cronguard.Option{cronguard.WithTick(0), cronguard.WithWait(time.Second)}, "MinHold"},
			}
			for _, c := range refused {
				_, err := cronguard.New(fu, name, c.opts...)
				var optErr *dblock.OptionError
				if !errors.Is(err, dblock.ErrInvalidOption) || !errors.As(err, &optErr) || optErr.Option != c.option {
					t.Errorf("%s: cronguard.New over forupdate = %v, want an *OptionError for %s", c.what, err, c.option)
				}
			}

			// Accepted: the job runs, under the lock.
			var runs atomic.Int32
			job := cronguard.Job(cronguard.ContextJobFunc(func(ctx context.Context) {
				runs.Add(1)
				if _, err := fu.TryAcquire(t.Context(), name); !errors.Is(err, dblock.ErrNotAcquired) {
					t.Errorf("another owner's TryAcquire during the run = %v, want ErrNotAcquired", err)
				}
				if ctx.Err() != nil {
					t.Errorf("job context done: %v", context.Cause(ctx))
				}
			}))
			w, err := cronguard.New(fu, name, cronguard.WithTick(0), cronguard.WithMinHold(0))
			if err != nil {
				t.Fatalf("cronguard.New over forupdate with one name and no MinHold: %v", err)
			}
			w(job).Run()
			if n := runs.Load(); n != 1 {
				t.Fatalf("the job ran %d times, want 1", n)
			}
			k, err := fu.TryAcquire(t.Context(), name)
			if err != nil {
				t.Fatalf("lock still held after the run: %v", err)
			}
			if err := k.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			// The refused guards created nothing: no row but the one name's.
			var rows int
			q := `SELECT COUNT(*) FROM dblock_forupdate WHERE starts_with(name, $1)`
			if tg.Dialect == dblock.MySQL {
				q = `SELECT COUNT(*) FROM dblock_forupdate WHERE LEFT(name, LENGTH(?)) = ?`
			}
			args := []any{name}
			if tg.Dialect == dblock.MySQL {
				args = []any{name, name}
			}
			if err := tg.DB.QueryRowContext(t.Context(), q, args...).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if rows != 1 {
				t.Fatalf("%d forupdate rows for names starting with %q, want 1 (no per-tick rows)", rows, name)
			}
		})
	}
}

// refusingLocker is a Locker that refuses every option set (OptionChecker),
// to check that the helpers built on a Locker ask.
type refusingLocker struct{ dblock.Locker }

func (refusingLocker) CheckOptions(...dblock.Option) error {
	return &dblock.OptionError{Option: "TTL", Reason: "refused by refusingLocker"}
}

func TestHelpersAskTheLocker(t *testing.T) {
	l := refusingLocker{newTestLocker(t, testdb.AllTargets(t)[0].DB)}
	if _, err := cronguard.New(l, "x", cronguard.WithTick(0)); !errors.Is(err, dblock.ErrInvalidOption) || !strings.Contains(err.Error(), "refusingLocker") {
		t.Errorf("cronguard.New = %v, want the Locker's refusal", err)
	}
	if _, err := leader.New(l, "x", nil); !errors.Is(err, dblock.ErrInvalidOption) || !strings.Contains(err.Error(), "refusingLocker") {
		t.Errorf("leader.New = %v, want the Locker's refusal", err)
	}
	if err := lockkit.CheckOptions(l.Locker, dblock.TTL(time.Second), dblock.MinHold(time.Second)); err != nil {
		t.Errorf("CheckOptions of a Locker without OptionChecker = %v, want nil", err)
	}
	if err := lockkit.CheckOptions(l.Locker, dblock.TTL(0)); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("CheckOptions(TTL(0)) = %v, want ErrInvalidOption", err)
	}
}

func TestGuardBadConfig(t *testing.T) {
	l := newTestLocker(t, testdb.AllTargets(t)[0].DB)
	var nilCtx context.Context
	cases := map[string]struct {
		l    dblock.Locker
		name string
		opts []cronguard.Option
		want error
	}{
		"nil locker":     {nil, "x", nil, dblock.ErrInvalidOption},
		"empty name":     {l, "", nil, dblock.ErrInvalidName},
		"long name":      {l, strings.Repeat("n", dblock.MaxNameLength+10), nil, nil},
		"NUL in name":    {l, "a\x00b", nil, dblock.ErrInvalidName},
		"negative tick":  {l, "x", []cronguard.Option{cronguard.WithTick(-1)}, dblock.ErrInvalidOption},
		"negative wait":  {l, "x", []cronguard.Option{cronguard.WithWait(-1)}, dblock.ErrInvalidOption},
		"negative hold":  {l, "x", []cronguard.Option{cronguard.WithMinHold(-1)}, dblock.ErrInvalidOption},
		"tiny TTL":       {l, "x", []cronguard.Option{cronguard.WithTTL(time.Millisecond)}, dblock.ErrInvalidOption},
		"nil context":    {l, "x", []cronguard.Option{cronguard.WithContext(nilCtx)}, dblock.ErrInvalidOption},
		"nil option":     {l, "x", []cronguard.Option{nil}, dblock.ErrInvalidOption},
		"long name ok 0": {l, strings.Repeat("n", dblock.MaxNameLength), []cronguard.Option{cronguard.WithTick(0)}, nil},
	}
	for what, c := range cases {
		_, err := cronguard.New(c.l, c.name, c.opts...)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: cronguard.New = %v, want %v", what, err, c.want)
		}
	}
}

// New makes a robfig/cron job run once per tick across all replicas;
// the job's context is canceled if the lock is lost.
func ExampleNew() {
	ctx := context.Background()
	db := testdb.ExampleDB()
	defer db.Close()
	if err := migrations.Up(ctx, db); err != nil {
		panic(err)
	}
	locker, err := rowlock.New(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	var once sync.Once
	done := make(chan struct{})
	report := cronguard.Job(cronguard.ContextJobFunc(func(ctx context.Context) {
		once.Do(func() {
			_, ok := cronguard.Tick(ctx)
			fmt.Println("report for this tick, on one replica:", ok)
			close(done)
		})
	}))
	c := cron.New(cron.WithSeconds())
	name := fmt.Sprintf("example/report-%d", time.Now().UnixNano())
	guard, err := cronguard.New(locker, name)
	if err != nil {
		panic(err)
	}
	// The guard is the last wrapper, so the job gets the lock's context.
	if _, err := c.AddJob("* * * * * *", cron.NewChain(cron.Recover(cron.DefaultLogger), guard).Then(report)); err != nil {
		panic(err)
	}
	c.Start()
	<-done
	<-c.Stop().Done()
	// Output:
	// report for this tick, on one replica: true
}
