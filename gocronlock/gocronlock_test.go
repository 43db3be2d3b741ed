package gocronlock_test

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

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/gocronlock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/leader"
	"github.com/sqllock/sqllock/rowlock"
)

func TestMain(m *testing.M) {
	testdb.Main(m)
}

func newRowLocker(t testing.TB, db *sql.DB) *rowlock.Locker {
	t.Helper()
	l, err := rowlock.New(db)
	if err != nil {
		t.Fatalf("rowlock.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func newScheduler(t testing.TB, opts ...gocron.SchedulerOption) gocron.Scheduler {
	t.Helper()
	s, err := gocron.NewScheduler(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown() })
	return s
}

// skewedClock is the real clock read off by skew: a replica whose clock is
// ahead (or behind) fires its whole-second jobs that much earlier (later).
type skewedClock struct {
	clockwork.Clock
	skew time.Duration
}

func (c skewedClock) Now() time.Time                  { return time.Now().Add(c.skew) }
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c skewedClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// firingLocker records, for each call of Lock, the tick the replica meant,
// and hands it to the run: gocron calls Lock when it fires the job, then
// runs the task, then Unlock, on one goroutine. The tick must be taken at
// the fire: by the time the task runs, the acquire may have taken long
// enough (a loaded CI machine) to cross into the next second. A replica
// runs one tick at a time, so that the task reads the tick its own fire
// recorded; a fire while the previous run is still going is skipped and
// not counted, as gocron's singleton mode would, and so is a fire whose
// Lock the scheduler's shutdown cut short.
type firingLocker struct {
	gocron.Locker
	tick func() time.Time     // the tick by the replica's clock, now
	fire func(tick time.Time) // records a fire

	running sync.Mutex // held from Lock to Unlock
	fired   time.Time  // the tick of the run under way; read under running
}

var errStillRunning = errors.New("previous run still going")

func (f *firingLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	tick := f.tick()
	if !f.running.TryLock() {
		return nil, errStillRunning
	}
	lock, err := f.Locker.Lock(ctx, key)
	// A fire cut short by the scheduler's shutdown (gocron ends the job's
	// context) owes no run; any other fire counts, whoever won it.
	if err == nil || ctx.Err() == nil {
		f.fire(tick)
	}
	if err != nil {
		f.running.Unlock()
		return nil, err
	}
	f.fired = tick
	return firingUnlock{Lock: lock, f: f}, nil
}

// firedTick is the tick of the run under way: call it from the task.
func (f *firingLocker) firedTick() time.Time { return f.fired }

type firingUnlock struct {
	gocron.Lock
	f *firingLocker
}

func (u firingUnlock) Unlock(ctx context.Context) error {
	defer u.f.running.Unlock()
	return u.Lock.Unlock(ctx)
}

// TestLockerThreeSchedulersRunEachTickOnce: three gocron schedulers, each
// with its own Locker and a clock skewed by 0, +100 ms or -100 ms (so
// firing on time, early or late), run an every-second cron job; each tick
// runs exactly once, and the lock table keeps one row for the job. The job's name is
// short, or longer than a lock name may be: gocron names jobs after their
// function, and a long name must run too, once per tick.
func TestLockerThreeSchedulersRunEachTickOnce(t *testing.T) {
	const duration = 4 * time.Second
	skews := []time.Duration{0, 100 * time.Millisecond, -100 * time.Millisecond}
	for _, tg := range testdb.AllTargets(t) {
		for _, long := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/long=%v", tg.Name, long), func(t *testing.T) {
				t.Parallel()
				base := testdb.Name(t)
				job := base
				if long {
					job += "/" + strings.Repeat("é", dblock.MaxNameLength)
				}
				var mu sync.Mutex
				fired, ran := map[time.Time]int{}, map[time.Time]int{}
				var schedulers []gocron.Scheduler
				for _, skew := range skews {
					clock := skewedClock{Clock: clockwork.NewRealClock(), skew: skew}
					locker, err := gocronlock.NewLocker(newRowLocker(t, tg.DB))
					if err != nil {
						t.Fatal(err)
					}
					firing := &firingLocker{
						Locker: locker,
						// The tick by the replica's own clock, independent of
						// the Locker's attribution.
						tick: func() time.Time { return clock.Now().Round(time.Second).UTC() },
						fire: func(tick time.Time) { mu.Lock(); fired[tick]++; mu.Unlock() },
					}
					s := newScheduler(t, gocron.WithClock(clock), gocron.WithDistributedLocker(firing))
					_, err = s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(func() {
						tick := firing.firedTick() // set by Lock, which holds firing.running
						mu.Lock()
						ran[tick]++
						mu.Unlock()
					}), gocron.WithName(job))
					if err != nil {
						t.Fatal(err)
					}
					schedulers = append(schedulers, s)
				}
				for _, s := range schedulers {
					s.Start()
				}
				time.Sleep(duration)
				for _, s := range schedulers {
					if err := s.Shutdown(); err != nil { // waits for running jobs
						t.Fatal(err)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				testdb.CheckEachTickOnce(t, fired, ran, len(skews), int(duration/time.Second)-2)
				if n := rowsOf(t, tg, base); n != 1 {
					t.Errorf("%d lock rows for one job, want 1", n)
				}
			})
		}
	}
}

// TestElectorOnlyLeaderRuns: of two schedulers with Electors only the
// leader's runs the job; when the leader stops campaigning the other takes
// over.
func TestElectorOnlyLeaderRuns(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			name := testdb.Name(t)
			var runsA, runsB atomic.Int32
			electorA, err := gocronlock.NewElector(newRowLocker(t, tg.DB), name, leader.WithLockOptions(dblock.TTL(time.Second)))
			if err != nil {
				t.Fatal(err)
			}
			electorB, err := gocronlock.NewElector(newRowLocker(t, tg.DB), name, leader.WithLockOptions(dblock.TTL(time.Second)))
			if err != nil {
				t.Fatal(err)
			}
			if err := electorA.IsLeader(t.Context()); !errors.Is(err, gocronlock.ErrNotLeader) {
				t.Fatalf("IsLeader before Run = %v, want ErrNotLeader", err)
			}
			stopA := run(t, electorA)
			waitFor(t, "A to lead", func() bool { return electorA.IsLeader(t.Context()) == nil })
			stopB := run(t, electorB)

			for _, c := range []struct {
				e    *gocronlock.Elector
				runs *atomic.Int32
			}{{electorA, &runsA}, {electorB, &runsB}} {
				s := newScheduler(t, gocron.WithDistributedElector(c.e))
				if _, err := s.NewJob(gocron.DurationJob(20*time.Millisecond), gocron.NewTask(func() { c.runs.Add(1) })); err != nil {
					t.Fatal(err)
				}
				s.Start()
			}
			waitFor(t, "A's jobs to run", func() bool { return runsA.Load() >= 5 })
			if n := runsB.Load(); n != 0 {
				t.Fatalf("follower ran the job %d times", n)
			}
			if err := electorB.IsLeader(t.Context()); !errors.Is(err, gocronlock.ErrNotLeader) {
				t.Fatalf("follower IsLeader = %v", err)
			}

			if err := stopA(); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run after stop = %v", err)
			}
			waitFor(t, "B to take over", func() bool { return runsB.Load() >= 2 })
			settled := runsA.Load()
			waitFor(t, "B's jobs to run", func() bool { return runsB.Load() >= 5 })
			if n := runsA.Load(); n != settled {
				t.Fatalf("stepped-down A ran the job %d more times", n-settled)
			}
			if err := stopB(); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run after stop = %v", err)
			}
		})
	}
}

func TestLockerUnlockAndErrors(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l := newRowLocker(t, tg.DB)
			key := testdb.Name(t)
			x, err := gocronlock.NewLocker(l, gocronlock.WithLockOptions(dblock.MinHold(0)), gocronlock.WithPrefix("app/"))
			if err != nil {
				t.Fatal(err)
			}
			lock, err := x.Lock(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := x.Lock(ctx, key); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("second Lock = %v, want ErrNotAcquired", err)
			}
			// The prefix is part of the lock's name.
			if _, err := l.TryAcquire(ctx, "app/"+key); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("TryAcquire of the prefixed name = %v, want ErrNotAcquired", err)
			}
			if err := lock.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := lock.Unlock(ctx); !errors.Is(err, dblock.ErrNotHeld) {
				t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
			}
			again, err := x.Lock(ctx, key)
			if err != nil {
				t.Fatalf("Lock after Unlock: %v", err)
			}
			// gocron unlocks with the job's context, which has ended on
			// shutdown: the lock must be released all the same.
			ended, cancel := context.WithCancel(ctx)
			cancel()
			if err := again.Unlock(ended); err != nil {
				t.Fatalf("Unlock with an ended context: %v", err)
			}

			waiting, err := gocronlock.NewLocker(l, gocronlock.WithLockOptions(dblock.MinHold(0)), gocronlock.WithWait(20*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			held, err := waiting.Lock(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				time.Sleep(50 * time.Millisecond)
				_ = held.Unlock(context.Background())
			}()
			next, err := waiting.Lock(ctx, key)
			if err != nil {
				t.Fatalf("waiting Lock: %v", err)
			}
			_ = next.Unlock(ctx)

			if _, err := x.Lock(ctx, "nul\x00key"); !errors.Is(err, dblock.ErrInvalidName) {
				t.Fatalf("key with NUL: %v, want ErrInvalidName", err)
			}
		})
	}
	l := newRowLocker(t, testdb.AllTargets(t)[0].DB)
	for what, opts := range map[string][]gocronlock.Option{
		"negative wait": {gocronlock.WithWait(-1)},
		"negative hold": {gocronlock.WithLockOptions(dblock.MinHold(-1))},
		"tiny TTL":      {gocronlock.WithLockOptions(dblock.TTL(time.Millisecond))},
		"nil option":    {nil},
	} {
		if _, err := gocronlock.NewLocker(l, opts...); !errors.Is(err, dblock.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", what, err)
		}
	}
	if _, err := gocronlock.NewLocker(nil); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("nil Locker: %v, want ErrInvalidOption", err)
	}
	if _, err := gocronlock.NewElector(l, ""); !errors.Is(err, dblock.ErrInvalidName) {
		t.Errorf("empty elector name: %v, want ErrInvalidName", err)
	}
}

// TestLockerRefusesWhatTheLockerRefuses: a forupdate Locker refuses a
// positive MinHold at every acquisition. Over it, a gocronlock Locker with
// a hold (the default's, or a fixed one) would fail every Lock, and gocron
// would skip every run, telling only an AfterLockError listener; so
// NewLocker refuses it, naming the option. What forupdate accepts (no
// hold) locks.
func TestLockerRefusesWhatTheLockerRefuses(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			fu, err := forupdate.New(tg.DB)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				what string
				opts []gocronlock.Option
			}{
				{"the default hold", nil},
				{"a fixed hold", []gocronlock.Option{gocronlock.WithLockOptions(dblock.MinHold(time.Minute))}},
				{"a hold, waiting", []gocronlock.Option{gocronlock.WithLockOptions(dblock.MinHold(time.Minute)), gocronlock.WithWait(time.Second)}},
			} {
				x, err := gocronlock.NewLocker(fu, c.opts...)
				var optErr *dblock.OptionError
				if x != nil || !errors.Is(err, dblock.ErrInvalidOption) || !errors.As(err, &optErr) || optErr.Option != "MinHold" {
					t.Errorf("%s: NewLocker over forupdate = %v, %v; want an *OptionError for MinHold", c.what, x, err)
				}
			}

			x, err := gocronlock.NewLocker(fu, gocronlock.WithLockOptions(dblock.MinHold(0)))
			if err != nil {
				t.Fatalf("NewLocker over forupdate with no hold: %v", err)
			}
			key := testdb.Name(t)
			lock, err := x.Lock(ctx, key)
			if err != nil {
				t.Fatalf("Lock: %v", err)
			}
			if _, err := x.Lock(ctx, key); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("second Lock = %v, want ErrNotAcquired", err)
			}
			if err := lock.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			again, err := x.Lock(ctx, key)
			if err != nil {
				t.Fatalf("Lock after Unlock: %v", err)
			}
			if err := again.Unlock(ctx); err != nil {
				t.Fatal(err)
			}

			// An Elector asks only for a TTL, which forupdate accepts.
			e, err := gocronlock.NewElector(fu, testdb.Name(t))
			if err != nil {
				t.Fatalf("NewElector over forupdate: %v", err)
			}
			stop := run(t, e)
			waitFor(t, "the forupdate Elector to lead", func() bool { return e.IsLeader(ctx) == nil })
			if err := stop(); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run after stop = %v", err)
			}
		})
	}
}

// run runs e.Run in a goroutine until stop is called or the test ends.
func run(t *testing.T, e *gocronlock.Elector) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// waitFor polls cond, failing after a bound that only catches hangs.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
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

// TestLockerLateReplicaSkipsOnceItKnowsThePeriod drives two Lockers as
// gocron would fire a job of period 2 s on two replicas, one on time and
// one 0.7 s late. Once each has seen a gap between runs, the on-time one
// holds the lock halfway to the next run: the late one skips, and the
// on-time one finds the lock free at the next run.
func TestLockerLateReplicaSkipsOnceItKnowsThePeriod(t *testing.T) {
	const period, late = 2 * time.Second, 700 * time.Millisecond
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			key := testdb.Name(t)
			onTime, err := gocronlock.NewLocker(newRowLocker(t, tg.DB))
			if err != nil {
				t.Fatal(err)
			}
			lateOne, err := gocronlock.NewLocker(newRowLocker(t, tg.DB))
			if err != nil {
				t.Fatal(err)
			}
			// fire calls Lock at a chosen time, and Unlock at once when
			// it got the lock.
			fire := func(x *gocronlock.Locker, at time.Time) error {
				time.Sleep(time.Until(at))
				lock, err := x.Lock(t.Context(), key)
				if err == nil {
					err = lock.Unlock(t.Context())
				}
				return err
			}
			t0 := time.Now().Add(100 * time.Millisecond)
			// The first runs teach each Locker nothing but a start: the
			// late one may run T0 again (FirstHold is half a second).
			if err := fire(onTime, t0); err != nil {
				t.Fatalf("on time at T0: %v", err)
			}
			if err := fire(lateOne, t0.Add(late)); err != nil && !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatal(err)
			}
			for n := 1; n <= 2; n++ {
				tick := t0.Add(time.Duration(n) * period)
				if err := fire(onTime, tick); err != nil {
					t.Fatalf("on time at T%d: %v, want the lock (free since halfway)", n, err)
				}
				if err := fire(lateOne, tick.Add(late)); !errors.Is(err, dblock.ErrNotAcquired) {
					t.Fatalf("%v late at T%d: %v, want ErrNotAcquired", late, n, err)
				}
			}
			if n := rowsOf(t, tg, key); n != 1 {
				t.Errorf("%d lock rows for one job, want 1", n)
			}
		})
	}
}
