package dblock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"
)

// DefaultGuardTick is the tick a CronGuard attributes runs to: every
// robfig/cron schedule fires on whole seconds, so a second always divides
// its activation times.
const DefaultGuardTick = time.Second

// ContextJob is a cron job that takes a context: under CronGuard it is
// canceled when the lock is lost (or the GuardContext ends). Adapt it to a
// cron.Job with CronJob.
type ContextJob interface {
	Run(ctx context.Context)
}

// ContextJobFunc makes a function a ContextJob.
type ContextJobFunc func(ctx context.Context)

// Run calls f(ctx).
func (f ContextJobFunc) Run(ctx context.Context) { f(ctx) }

// CronJob adapts j to a cron.Job. Wrapped directly by a CronGuard (the guard
// is the last wrapper of its chain), j runs with the lock's context; run
// any other way it gets context.Background().
func CronJob(j ContextJob) cron.Job { return contextJob{j} }

type contextJob struct{ job ContextJob }

func (c contextJob) Run() { c.job.Run(context.Background()) }

type cronTickKey struct{}

// CronTick returns the tick a CronGuard attributed the current run to (the
// scheduled time, rounded to the guard's tick), for jobs that want an
// idempotency key or "the period ending at". ok is false outside a guarded
// run and in GuardTick(0) mode.
func CronTick(ctx context.Context) (tick time.Time, ok bool) {
	tick, ok = ctx.Value(cronTickKey{}).(time.Time)
	return tick, ok
}

// GuardOption configures a CronGuard.
type GuardOption func(*guardConfig)

type guardConfig struct {
	tick       time.Duration
	minHold    time.Duration
	minHoldSet bool
	ttl        time.Duration
	wait       time.Duration
	logger     *slog.Logger
	ctx        context.Context
}

// GuardTick sets the resolution of the per-tick lock names; default
// DefaultGuardTick (1 s). A run is attributed to the multiple of d (since
// the zero time; for d dividing a day, whole UTC seconds, minutes or hours)
// nearest to when it fires, so replicas whose schedulers or clocks are apart
// by less than d/2 agree on the tick. Every scheduled time must be such a
// multiple: a second always is; a minute is for the usual 5-field specs; an
// hour is not in zones with half-hour offsets. A larger d tolerates larger
// offsets. GuardTick(0) uses one lock name for every run instead: runs never
// overlap across replicas, and MinHold must then be longer than the offsets
// between replicas and shorter than the period minus them.
func GuardTick(d time.Duration) GuardOption { return func(c *guardConfig) { c.tick = d } }

// GuardMinHold sets how long the lock stays taken after the job started,
// even when it finished sooner, so that a replica firing the same tick later
// finds it taken; default the tick (DefaultGuardTick with GuardTick(0)).
func GuardMinHold(d time.Duration) GuardOption {
	return func(c *guardConfig) { c.minHold, c.minHoldSet = d, true }
}

// GuardTTL sets the lease of the lock, renewed while the job runs; default
// DefaultTTL. It bounds how long a crashed replica blocks the job.
func GuardTTL(d time.Duration) GuardOption { return func(c *guardConfig) { c.ttl = d } }

// GuardWait makes a replica wait up to d for the lock instead of skipping the
// run when another holds it; default 0 (skip at once). Waiting serializes
// the replicas' runs rather than deduplicating them: every replica that gets
// the lock within d runs the job, one after the other.
func GuardWait(d time.Duration) GuardOption { return func(c *guardConfig) { c.wait = d } }

// GuardLogger sets where the guard reports skipped runs (Debug), lost locks
// (Warn) and lock errors (Error); default nowhere.
func GuardLogger(l *slog.Logger) GuardOption { return func(c *guardConfig) { c.logger = l } }

// GuardContext sets the context that acquisitions and jobs derive from:
// its values reach the jobs, and its end cancels them (for example on
// shutdown, with cron.Stop). Default context.Background().
func GuardContext(ctx context.Context) GuardOption { return func(c *guardConfig) { c.ctx = ctx } }

// tickLayout formats ticks in lock names: UTC, sub-second digits only when
// the tick has them. maxTickSuffix is the longest suffix it makes.
const (
	tickLayout    = time.RFC3339Nano
	maxTickSuffix = len("@2006-01-02T15:04:05.999999999Z")
)

// CronGuard returns a cron.JobWrapper that runs the wrapped job only on the
// replica that takes the lock for the current tick of the job named name, and
// panics when the configuration is invalid (use NewCronGuard to get an error
// instead).
//
// Each tick has its own lock, name@tick (for example
// "jobs/report@2025-01-02T03:04:05Z"): a replica firing that tick later, by
// clock skew or a slow scheduler, finds it taken for MinHold and skips.
// Per-tick names make "each tick exactly once" hold for any job duration and
// any period, as long as replicas fire within half a tick of the schedule.
// With a single name and MinHold instead, MinHold would have to exceed the offsets
// between replicas yet stay below the period minus them, and a run longer
// than the period would swallow the next tick. The cost is one row per tick
// in the lock table: released rows stay until the reaper sweeps them.
//
// By default the guard does not wait (TryAcquire: another replica runs this
// tick) and holds the lock at least one tick. A job adapted with CronJob gets
// the lock's context, canceled when the lock is lost. The lock is released
// when the job returns or panics.
func CronGuard(l Locker, name string, opts ...GuardOption) cron.JobWrapper {
	w, err := NewCronGuard(l, name, opts...)
	if err != nil {
		panic(err)
	}
	return w
}

// NewCronGuard is CronGuard returning configuration errors (wrapping
// ErrInvalidOption or ErrInvalidName) instead of panicking.
//
// It also refuses, with an error wrapping ErrInvalidOption, a Locker that
// would refuse the guard's acquisitions at every run (see OptionChecker)
// or that keeps a row for every name (NameKeeper) when names are per tick.
// A forupdate Locker is both: it cannot hold a lock past its release
// (MinHold), and its rows are permanent. Over it, only
// GuardTick(0) with GuardMinHold(0) is accepted, which serializes the
// replicas' runs but does not deduplicate them; use rowlock to run each
// tick once.
func NewCronGuard(l Locker, name string, opts ...GuardOption) (cron.JobWrapper, error) {
	cfg := guardConfig{tick: DefaultGuardTick, ttl: DefaultTTL, logger: slog.New(slog.DiscardHandler), ctx: context.Background()}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("dblock: CronGuard: %w", &OptionError{Option: "GuardOption", Reason: "nil option"})
		}
		opt(&cfg)
	}
	if !cfg.minHoldSet {
		cfg.minHold = cfg.tick
		if cfg.tick == 0 {
			cfg.minHold = DefaultGuardTick
		}
	}
	var bad *OptionError
	switch {
	case l == nil:
		bad = &OptionError{Option: "Locker", Reason: "nil"}
	case cfg.tick < 0:
		bad = &OptionError{Option: "GuardTick", Reason: "must not be negative"}
	case cfg.wait < 0:
		bad = &OptionError{Option: "GuardWait", Reason: "must not be negative"}
	case cfg.logger == nil:
		bad = &OptionError{Option: "GuardLogger", Reason: "nil logger"}
	case cfg.ctx == nil:
		bad = &OptionError{Option: "GuardContext", Reason: "nil context"}
	}
	if bad != nil {
		return nil, fmt.Errorf("dblock: CronGuard: %w", bad)
	}
	lockOpts := []Option{TTL(cfg.ttl), MinHold(cfg.minHold)}
	if _, err := ResolveOptions(lockOpts...); err != nil {
		return nil, fmt.Errorf("dblock: CronGuard: %w", err)
	}
	// Refused here rather than at every tick: the guard's runs report lock
	// errors only to its logger, silent by default, so a Locker refusing
	// the guard's options would never run the job and say nothing.
	if cfg.tick > 0 && keepsNames(l) {
		return nil, fmt.Errorf("dblock: CronGuard: %w", &OptionError{Option: "GuardTick",
			Reason: fmt.Sprintf("the Locker (%T) keeps a row for every name it locks, and per-tick names would leave one per tick: use GuardTick(0), or a Locker with leases (rowlock)", l)})
	}
	if err := CheckOptions(l, lockOpts...); err != nil {
		return nil, fmt.Errorf("dblock: CronGuard: %w", err)
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if cfg.tick > 0 && len(name) > MaxNameLength-maxTickSuffix {
		return nil, &NameError{Name: name, Reason: fmt.Sprintf("longer than %d bytes, leaving no room for the tick", MaxNameLength-maxTickSuffix)}
	}
	g := &guard{l: l, name: name, cfg: cfg, lockOpts: lockOpts}
	return func(j cron.Job) cron.Job { return guardedJob{g: g, job: j} }, nil
}

type guard struct {
	l        Locker
	name     string
	cfg      guardConfig
	lockOpts []Option
}

type guardedJob struct {
	g   *guard
	job cron.Job
}

// Run is called by the scheduler at each activation.
func (j guardedJob) Run() {
	g := j.g
	fired := time.Now()
	base := g.cfg.ctx
	if base.Err() != nil {
		return
	}
	name := g.name
	if g.cfg.tick > 0 {
		tick := fired.Round(g.cfg.tick).UTC()
		name += "@" + tick.Format(tickLayout)
		base = context.WithValue(base, cronTickKey{}, tick)
	}
	lock, err := g.acquire(base, name)
	switch {
	case errors.Is(err, ErrNotAcquired):
		g.cfg.logger.Debug("dblock: cron run skipped: lock held elsewhere", "name", name)
		return
	case err != nil:
		g.cfg.logger.Error("dblock: cron run skipped: cannot take the lock", "name", name, "error", err)
		return
	}
	// Released even if the job panics (cron.Recover may be outside us).
	defer g.release(base, lock)

	ctx, cancel := context.WithCancel(lock.Context())
	defer cancel()
	stop := context.AfterFunc(base, cancel)
	defer stop()
	if cj, ok := j.job.(contextJob); ok {
		cj.job.Run(ctx)
	} else {
		j.job.Run()
	}
}

func (g *guard) acquire(ctx context.Context, name string) (Lock, error) {
	if g.cfg.wait == 0 {
		return g.l.TryAcquire(ctx, name, g.lockOpts...)
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.wait)
	defer cancel()
	return g.l.Acquire(ctx, name, g.lockOpts...)
}

func (g *guard) release(base context.Context, lock Lock) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(base), releaseTimeout)
	defer cancel()
	err := lock.Release(ctx)
	switch {
	case err == nil:
	case errors.Is(err, ErrLockLost):
		g.cfg.logger.Warn("dblock: cron job lost its lock while running", "name", lock.Name(), "error", err)
	default:
		g.cfg.logger.Error("dblock: releasing cron lock", "name", lock.Name(), "error", err)
	}
}
