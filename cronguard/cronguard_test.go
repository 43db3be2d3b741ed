package cronguard_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
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
	"github.com/sqllock/sqllock/rowlock"
)

func TestMain(m *testing.M) {
	// A guard starts no goroutines that outlive a run; the locks it takes
	// stop theirs on Release.
	testdb.Main(m)
}

// newGuard is cronguard.New that fails the test on an error.
func newGuard(t testing.TB, c *cron.Cron, l dblock.Locker, opts ...cronguard.Option) *cronguard.Guard {
	t.Helper()
	g, err := cronguard.New(c, l, opts...)
	if err != nil {
		t.Fatalf("cronguard.New: %v", err)
	}
	return g
}

// guarded returns job as a Cron would run it, added under name on
// schedule by a guard over l, on a Cron that never starts: calling its Run
// fires it now.
func guarded(t testing.TB, l dblock.Locker, name string, schedule cron.Schedule, job cron.Job, opts ...cronguard.Option) cron.Job {
	t.Helper()
	c := cron.New()
	id, err := newGuard(t, c, l, opts...).Schedule(name, schedule, job)
	if err != nil {
		t.Fatalf("Schedule: %v", err)
	}
	return c.Entry(id).WrappedJob
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

// grid activates every period from phase on: a schedule whose first
// activation a test chooses.
type grid struct {
	phase  time.Time
	period time.Duration
}

func (g grid) Next(t time.Time) time.Time {
	if t.Before(g.phase) {
		return g.phase
	}
	return g.phase.Add((t.Sub(g.phase)/g.period + 1) * g.period)
}

// rowsOf counts the lock table's rows whose name starts with prefix.
func rowsOf(t testing.TB, tg testdb.Target, prefix string) int {
	t.Helper()
	q, args := `SELECT COUNT(*) FROM dblock_locks WHERE substr(name, 1, length($1)) = $1`, []any{prefix}
	switch tg.Dialect {
	case dblock.MySQL:
		q, args = `SELECT COUNT(*) FROM dblock_locks WHERE SUBSTR(name, 1, CHAR_LENGTH(?)) = ?`, []any{prefix, prefix}
	case dblock.SQLite:
		q = `SELECT COUNT(*) FROM dblock_locks WHERE substr(name, 1, length(?1)) = ?1`
	}
	var n int
	if err := tg.DB.QueryRowContext(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// fireSlot is one replica's record of what one job fired for: set by the
// Cron's chain as the job fires, read by the job under the guard. Its
// mutex is held through a run, so a replica runs one activation of a job
// at a time: a fire while the previous run is still going is dropped and
// not counted, as cron.SkipIfStillRunning would.
type fireSlot struct {
	mu   sync.Mutex
	tick time.Time
}

// TestGuardThreeReplicasThreeJobsRunEachTickOnce: the README's way, one
// guard per scheduler adding every job under its own name, on three
// replicas (three Crons, each with its own Locker on the same database),
// each firing three every-second jobs, 0, 100 and 200 ms late. Every job
// runs exactly once per activation, and the lock table keeps one row per
// job.
func TestGuardThreeReplicasThreeJobsRunEachTickOnce(t *testing.T) {
	const ticks = 4 // activations every replica fires, per job
	delays := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			prefix := testdb.Name(t)
			jobs := []string{prefix + "/a", prefix + "/b", prefix + "/c"}
			var (
				mu       sync.Mutex
				fired    = map[string]map[time.Time]int{} // job -> tick -> replicas that fired it
				ran      = map[string]map[time.Time]int{} // job -> tick -> runs
				problems []string
			)
			for _, job := range jobs {
				fired[job], ran[job] = map[time.Time]int{}, map[time.Time]int{}
			}
			report := func(format string, args ...any) {
				mu.Lock()
				problems = append(problems, fmt.Sprintf(format, args...))
				mu.Unlock()
			}
			var crons []*cron.Cron
			for _, delay := range delays {
				slots := make([]*fireSlot, len(jobs))
				wrapped := 0
				// The Cron's chain wraps each job as it is added, in the
				// order added: the wrapper knows which job it fires.
				late := func(j cron.Job) cron.Job {
					job, slot := jobs[wrapped], &fireSlot{}
					slots[wrapped] = slot
					wrapped++
					return cron.FuncJob(func() {
						// The activation, taken as it fires, before the
						// delay: robfig/cron fires on whole seconds.
						tick := time.Now().Round(time.Second).UTC()
						if !slot.mu.TryLock() {
							return
						}
						defer slot.mu.Unlock()
						mu.Lock()
						fired[job][tick]++
						mu.Unlock()
						slot.tick = tick
						time.Sleep(delay)
						j.Run()
					})
				}
				c := cron.New(cron.WithSeconds(), cron.WithChain(late))
				guard := newGuard(t, c, newTestLocker(t, tg.DB))
				for i, job := range jobs {
					_, err := guard.AddJob(job, "* * * * * *", cronguard.Job(cronguard.ContextJobFunc(func(ctx context.Context) {
						tick := slots[i].tick // set by late, which holds slots[i].mu
						if got, ok := cronguard.Tick(ctx); !ok || !got.Equal(tick) {
							report("replica %v, job %s: guard attributed the run to %v (ok %v), fired for %v", delay, job, got, ok, tick)
						}
						mu.Lock()
						ran[job][tick]++
						mu.Unlock()
					})))
					if err != nil {
						t.Fatal(err)
					}
				}
				crons = append(crons, c)
			}
			for _, c := range crons {
				c.Start()
			}
			waitFor(t, "every job to be fired by every replica", func() bool {
				mu.Lock()
				defer mu.Unlock()
				for _, job := range jobs {
					contended := 0
					for _, n := range fired[job] {
						if n == len(delays) {
							contended++
						}
					}
					if contended < ticks {
						return false
					}
				}
				return true
			})
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
			for _, job := range jobs {
				t.Run(job[len(prefix)+1:], func(t *testing.T) {
					testdb.CheckEachTickOnce(t, fired[job], ran[job], len(delays), ticks)
				})
			}
			// No reaper ran: the guards left one row per job.
			if n := rowsOf(t, tg, prefix); n != len(jobs) {
				t.Errorf("%d lock rows for %d jobs, want one per job", n, len(jobs))
			}
		})
	}
}

// TestGuardLateOrEarlyReplicaNeverRunsATickAgain fires one job on three
// replicas at times the test chooses, on a schedule of period P: A on time
// at T1 runs it; B, late by L (0.7 s of 2 s, 3 s of 10 s), must skip it;
// C, early for T2 = T1+P by E, must find the lock free and run T2. The fires
// are real: a guard's hold is measured by the database clock.
func TestGuardLateOrEarlyReplicaNeverRunsATickAgain(t *testing.T) {
	cases := []struct {
		name                string
		period, late, early time.Duration
	}{
		{"2s-0.7s-late", 2 * time.Second, 700 * time.Millisecond, 500 * time.Millisecond},
		{"10s-3s-late", 10 * time.Second, 3 * time.Second, 3 * time.Second},
	}
	for _, tg := range testdb.AllTargets(t) {
		for _, tc := range cases {
			t.Run(tg.Name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				name := testdb.Name(t)
				schedule := grid{phase: time.Now().Add(200 * time.Millisecond), period: tc.period}
				t1, t2 := schedule.phase, schedule.phase.Add(tc.period)
				var ticks []time.Time // of the runs, in order
				job := cronguard.Job(cronguard.ContextJobFunc(func(ctx context.Context) {
					tick, _ := cronguard.Tick(ctx)
					ticks = append(ticks, tick)
				}))
				replicas := map[string]cron.Job{}
				for _, r := range []string{"A", "B", "C"} {
					replicas[r] = guarded(t, newTestLocker(t, tg.DB), name, schedule, job)
				}
				// One fire after the other: a fire slower than planned
				// delays the next, and never races it.
				for _, fire := range []struct {
					replica string
					at      time.Time
					runs    []time.Time // the ticks run so far, after it
				}{
					{"A", t1, []time.Time{t1}},
					{"B", t1.Add(tc.late), []time.Time{t1}},
					{"C", t2.Add(-tc.early), []time.Time{t1, t2}},
				} {
					time.Sleep(time.Until(fire.at))
					replicas[fire.replica].Run()
					if !slices.EqualFunc(ticks, fire.runs, time.Time.Equal) {
						t.Fatalf("after %s fired %v after T1: runs for ticks %v, want %v", fire.replica, fire.at.Sub(t1), ticks, fire.runs)
					}
				}
				// No reaper ran: one row for the job.
				if n := rowsOf(t, tg, name); n != 1 {
					t.Errorf("%d lock rows for one job, want 1", n)
				}
			})
		}
	}
}

// TestGuardSkipsATakenActivation: a second replica firing the same
// activation after the first finished skips it (the hold), and a name held
// by someone else is skipped too.
func TestGuardSkipsATakenActivation(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			name := testdb.Name(t)
			var runs atomic.Int32
			var ticks []time.Time
			job := cronguard.Job(cronguard.ContextJobFunc(func(ctx context.Context) {
				runs.Add(1)
				tick, ok := cronguard.Tick(ctx)
				if !ok {
					t.Error("Tick missing in a guarded run")
				}
				ticks = append(ticks, tick)
			}))
			// Hourly from now: both fires are minutes within the first
			// activation's window, however slow the machine.
			hourly := grid{phase: time.Now(), period: time.Hour}
			guarded(t, newTestLocker(t, tg.DB), name, hourly, job).Run()
			guarded(t, newTestLocker(t, tg.DB), name, hourly, job).Run()
			if len(ticks) != 1 {
				t.Fatalf("two replicas firing one activation ran the job %d times, want 1", len(ticks))
			}
			if !ticks[0].Equal(hourly.phase) {
				t.Errorf("Tick = %v, want %v", ticks[0], hourly.phase)
			}

			// Skipped while someone else holds the name.
			single := testdb.Name(t)
			holder, err := newTestLocker(t, tg.DB).TryAcquire(t.Context(), single)
			if err != nil {
				t.Fatal(err)
			}
			var plainRuns atomic.Int32
			plain := cron.FuncJob(func() { plainRuns.Add(1) })
			run := guarded(t, newTestLocker(t, tg.DB), single, hourly, plain, cronguard.WithLockOptions(dblock.MinHold(0)))
			run.Run()
			if n := plainRuns.Load(); n != 0 {
				t.Fatalf("ran %d times while the lock was held elsewhere", n)
			}
			if err := holder.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			run.Run()
			run.Run() // MinHold 0: released at once, so this runs too
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
			hourly := grid{phase: time.Now(), period: time.Hour}
			var wg sync.WaitGroup
			for range 3 {
				run := guarded(t, newTestLocker(t, tg.DB), name, hourly, job,
					cronguard.WithLockOptions(dblock.MinHold(0)), cronguard.WithWait(20*time.Second))
				wg.Go(run.Run)
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
			run := guarded(t, l, testdb.Name(t), grid{phase: time.Now(), period: time.Hour}, job, cronguard.WithLockOptions(dblock.TTL(ttl)))
			done := make(chan struct{})
			go func() {
				defer close(done)
				run.Run()
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
			hourly := grid{phase: time.Now(), period: time.Hour}
			panicky := guarded(t, l, name, hourly, cron.FuncJob(func() { panic("boom") }), cronguard.WithLockOptions(dblock.MinHold(0)))
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
			guarded(t, l, name, hourly, job, cronguard.WithContext(ctx)).Run()
			if !errors.Is(cause, context.Canceled) {
				t.Fatalf("job context after WithContext ended: %v, want canceled", cause)
			}
		})
	}
}

// TestGuardRefusesWhatTheLockerRefuses: a forupdate Locker refuses a
// positive MinHold at every acquisition. A guard over it with the default
// hold would never run a job and, its logger discarding, never say why;
// so cronguard.New refuses it, naming the option. What the Locker accepts
// (no hold) runs the job under the lock, and leaves one row.
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
				what string
				opts []cronguard.Option
			}{
				{"the default hold", nil},
				{"a fixed hold", []cronguard.Option{cronguard.WithLockOptions(dblock.MinHold(time.Minute))}},
				{"waiting, the default hold", []cronguard.Option{cronguard.WithWait(time.Second)}},
			}
			for _, c := range refused {
				_, err := cronguard.New(cron.New(), fu, c.opts...)
				var optErr *dblock.OptionError
				if !errors.Is(err, dblock.ErrInvalidOption) || !errors.As(err, &optErr) || optErr.Option != "MinHold" {
					t.Errorf("%s: cronguard.New over forupdate = %v, want an *OptionError for MinHold", c.what, err)
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
			guarded(t, fu, name, grid{phase: time.Now(), period: time.Hour}, job, cronguard.WithLockOptions(dblock.MinHold(0))).Run()
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
			var rows int
			q, args := `SELECT COUNT(*) FROM dblock_forupdate WHERE starts_with(name, $1)`, []any{name}
			if tg.Dialect == dblock.MySQL {
				q, args = `SELECT COUNT(*) FROM dblock_forupdate WHERE LEFT(name, LENGTH(?)) = ?`, []any{name, name}
			}
			if err := tg.DB.QueryRowContext(t.Context(), q, args...).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if rows != 1 {
				t.Fatalf("%d forupdate rows for names starting with %q, want 1", rows, name)
			}
		})
	}
}

// refusingLocker is a Locker that refuses every option set (declared as
// lockkit.Capabilities), to check that the helpers built on a Locker ask.
type refusingLocker struct{ dblock.Locker }

func init() {
	lockkit.Declare(refusingLocker{}, lockkit.Capabilities{
		CheckOptions: func(dblock.Locker, ...dblock.Option) error {
			return &dblock.OptionError{Option: "TTL", Reason: "refused by refusingLocker"}
		},
	})
}

func TestHelpersAskTheLocker(t *testing.T) {
	l := refusingLocker{newTestLocker(t, testdb.AllTargets(t)[0].DB)}
	if _, err := cronguard.New(cron.New(), l, cronguard.WithLockOptions(dblock.MinHold(0))); !errors.Is(err, dblock.ErrInvalidOption) || !strings.Contains(err.Error(), "refusingLocker") {
		t.Errorf("cronguard.New = %v, want the Locker's refusal", err)
	}
	if _, err := leader.New(l, "x", nil); !errors.Is(err, dblock.ErrInvalidOption) || !strings.Contains(err.Error(), "refusingLocker") {
		t.Errorf("leader.New = %v, want the Locker's refusal", err)
	}
	if err := lockkit.CheckOptions(l.Locker, dblock.TTL(time.Second), dblock.MinHold(time.Second)); err != nil {
		t.Errorf("CheckOptions of a Locker that declares nothing = %v, want nil", err)
	}
	if err := lockkit.CheckOptions(l.Locker, dblock.TTL(0)); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("CheckOptions(TTL(0)) = %v, want ErrInvalidOption", err)
	}
}

func TestGuardBadConfig(t *testing.T) {
	l := newTestLocker(t, testdb.AllTargets(t)[0].DB)
	var nilCtx context.Context
	cases := map[string]struct {
		c    *cron.Cron
		l    dblock.Locker
		opts []cronguard.Option
	}{
		"nil cron":      {nil, l, nil},
		"nil locker":    {cron.New(), nil, nil},
		"negative wait": {cron.New(), l, []cronguard.Option{cronguard.WithWait(-1)}},
		"negative hold": {cron.New(), l, []cronguard.Option{cronguard.WithLockOptions(dblock.MinHold(-1))}},
		"tiny TTL":      {cron.New(), l, []cronguard.Option{cronguard.WithLockOptions(dblock.TTL(time.Millisecond))}},
		"nil context":   {cron.New(), l, []cronguard.Option{cronguard.WithContext(nilCtx)}},
		"nil option":    {cron.New(), l, []cronguard.Option{nil}},
	}
	for what, c := range cases {
		if g, err := cronguard.New(c.c, c.l, c.opts...); g != nil || !errors.Is(err, dblock.ErrInvalidOption) {
			t.Errorf("%s: cronguard.New = %v, %v; want ErrInvalidOption", what, g, err)
		}
	}
}

// TestGuardRefusesASharedName: a guard takes each job under its own name
// and refuses a second job under a name guarded on its Cron (by it or by
// another Guard), a bad name and a bad schedule, adding nothing to the
// Cron; Remove frees a name.
func TestGuardRefusesASharedName(t *testing.T) {
	c := cron.New(cron.WithSeconds())
	g := newGuard(t, c, newTestLocker(t, testdb.AllTargets(t)[0].DB))
	nop := cron.FuncJob(func() {})
	first, err := g.AddJob("jobs/report", "0 * * * * *", nop)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.AddJob("jobs/other", "0 * * * * *", nop); err != nil {
		t.Fatalf("a second job under its own name: %v", err)
	}
	for what, c := range map[string]struct {
		add  func() (cron.EntryID, error)
		want error
	}{
		"same name, AddJob":   {func() (cron.EntryID, error) { return g.AddJob("jobs/report", "*/5 * * * * *", nop) }, cronguard.ErrDuplicateName},
		"same name, Schedule": {func() (cron.EntryID, error) { return g.Schedule("jobs/report", cron.Every(time.Minute), nop) }, cronguard.ErrDuplicateName},
		"empty name":          {func() (cron.EntryID, error) { return g.AddJob("", "0 * * * * *", nop) }, dblock.ErrInvalidName},
		"NUL in name":         {func() (cron.EntryID, error) { return g.AddJob("a\x00b", "0 * * * * *", nop) }, dblock.ErrInvalidName},
		"bad spec":            {func() (cron.EntryID, error) { return g.AddJob("jobs/bad", "every minute", nop) }, cronguard.ErrInvalidSchedule},
		"five-field spec":     {func() (cron.EntryID, error) { return g.AddJob("jobs/bad", "* * * * *", nop) }, cronguard.ErrInvalidSchedule},
		"nil schedule":        {func() (cron.EntryID, error) { return g.Schedule("jobs/bad", nil, nop) }, cronguard.ErrInvalidSchedule},
		"nil job":             {func() (cron.EntryID, error) { return g.AddJob("jobs/nil", "0 * * * * *", nil) }, dblock.ErrInvalidOption},
	} {
		if id, err := c.add(); id != 0 || !errors.Is(err, c.want) {
			t.Errorf("%s: %v, %v; want %v", what, id, err, c.want)
		}
	}
	// Another Guard on the same Cron (other options, say) shares its
	// names; a Guard on another Cron (another replica) does not.
	other := newGuard(t, c, newTestLocker(t, testdb.AllTargets(t)[0].DB), cronguard.WithLockOptions(dblock.MinHold(0)))
	if id, err := other.AddJob("jobs/report", "*/5 * * * * *", nop); id != 0 || !errors.Is(err, cronguard.ErrDuplicateName) {
		t.Errorf("a second Guard on the Cron, same name: %v, %v; want ErrDuplicateName", id, err)
	}
	if _, err := newGuard(t, cron.New(cron.WithSeconds()), newTestLocker(t, testdb.AllTargets(t)[0].DB)).AddJob("jobs/report", "0 * * * * *", nop); err != nil {
		t.Errorf("the same name on another Cron: %v", err)
	}
	if n := len(c.Entries()); n != 2 {
		t.Errorf("%d entries in the Cron, want the 2 added", n)
	}
	// The refused spec freed its name.
	if _, err := g.AddJob("jobs/bad", "0 * * * * *", nop); err != nil {
		t.Errorf("a good spec under a name refused with a bad one: %v", err)
	}
	if _, err := g.AddJob(strings.Repeat("n", 1000), "0 * * * * *", nop); err != nil {
		t.Errorf("a long name: %v", err)
	}
	g.Remove(first)
	if _, err := g.AddJob("jobs/report", "0 * * * * *", nop); err != nil {
		t.Errorf("a name freed by Remove: %v", err)
	}
}

// TestGuardAddsToARunningCron: a job added while the Cron runs learns its
// schedule from the running Cron, and runs under its own name.
func TestGuardAddsToARunningCron(t *testing.T) {
	c := cron.New(cron.WithSeconds())
	c.Start()
	defer func() { <-c.Stop().Done() }()
	g := newGuard(t, c, newTestLocker(t, testdb.AllTargets(t)[0].DB))
	ran := make(chan time.Time, 1)
	job := cronguard.Job(cronguard.ContextJobFunc(func(ctx context.Context) {
		tick, _ := cronguard.Tick(ctx)
		select {
		case ran <- tick:
		default:
		}
	}))
	if _, err := g.AddJob(testdb.Name(t), "* * * * * *", job); err != nil {
		t.Fatal(err)
	}
	select {
	case tick := <-ran:
		if tick.IsZero() || tick.Nanosecond() != 0 {
			t.Errorf("Tick = %v, want an activation of the every-second spec", tick)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the job added to a running Cron never ran")
	}
}

// waitFor polls cond, failing after a bound that only catches hangs.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
