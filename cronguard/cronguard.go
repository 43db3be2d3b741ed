// Package cronguard makes each tick of a robfig/cron job run on one replica:
// a cron.JobWrapper takes a lock for the tick from any dblock.Locker before
// the job runs, and the replicas that lose the race skip that tick.
//
// Each tick has its own lock, name@tick (for example
// "jobs/report@2025-01-02T03:04:05Z"): a replica firing that tick later, by
// clock skew or a slow scheduler, finds it taken for MinHold and skips. So
// "each tick exactly once" holds for any job duration and any period, as
// long as replicas fire within half a tick of the schedule. The cost is one
// row per tick in the lock table: released rows stay until the reaper
// (package reaper, or `sqllock reap` from cron) deletes them, so run it.
//
// gocronlock does the same for gocron, with the same options.
//
// A guard logs where its Locker does (rowlock.WithLogger,
// forupdate.WithLogger): skipped runs at Debug, lost locks at Warn, lock
// errors at Error. A dblock.Locker of another kind can say where by having
// a Logger() *slog.Logger method; without one, the guard logs to
// slog.Default() at Warn and above.
package cronguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/logging"
	"github.com/sqllock/sqllock/internal/tickguard"
)

// DefaultTick is the tick a guard attributes runs to: every robfig/cron
// schedule fires on whole seconds, so a second always divides its
// activation times.
const DefaultTick = tickguard.DefaultTick

// ContextJob is a cron job that takes a context: under a guard it is
// canceled when the lock is lost (or the WithContext context ends). Adapt it
// to a cron.Job with Job.
type ContextJob interface {
	Run(ctx context.Context)
}

// ContextJobFunc makes a function a ContextJob.
type ContextJobFunc func(ctx context.Context)

// Run calls f(ctx).
func (f ContextJobFunc) Run(ctx context.Context) { f(ctx) }

// Job adapts j to a cron.Job. Wrapped directly by a guard (the guard is the
// last wrapper of its chain), j runs with the lock's context; run any other
// way it gets context.Background().
func Job(j ContextJob) cron.Job { return contextJob{j} }

type contextJob struct{ job ContextJob }

func (c contextJob) Run() { c.job.Run(context.Background()) }

type tickKey struct{}

// Tick returns the tick a guard attributed the current run to (the
// scheduled time, rounded to the guard's tick), for jobs that want an
// idempotency key or "the period ending at". ok is false outside a guarded
// run and with WithTick(0).
func Tick(ctx context.Context) (tick time.Time, ok bool) {
	tick, ok = ctx.Value(tickKey{}).(time.Time)
	return tick, ok
}

// Option configures a guard.
type Option func(*config)

type config struct {
	tick tickguard.Config
	ctx  context.Context
}

// WithTick sets the resolution of the per-tick lock names; default
// DefaultTick (1 s). A run is attributed to the multiple of d (since the
// zero time; for d dividing a day, whole UTC seconds, minutes or hours)
// nearest to when it fires, so replicas whose schedulers or clocks are apart
// by less than d/2 agree on the tick. Every scheduled time must be such a
// multiple: a second always is; a minute is for the usual 5-field specs; an
// hour is not in zones with half-hour offsets. WithTick(0) uses one lock
// name for every run instead: runs never overlap across replicas, and
// MinHold must then be longer than the offsets between replicas and shorter
// than the period minus them.
func WithTick(d time.Duration) Option { return func(c *config) { c.tick.Tick = d } }

// WithMinHold sets how long the lock stays taken after the job started,
// even when it finished sooner, so that a replica firing the same tick later
// finds it taken; default the tick (DefaultTick with WithTick(0)).
func WithMinHold(d time.Duration) Option {
	return func(c *config) { c.tick.MinHold, c.tick.MinHoldSet = d, true }
}

// WithTTL sets the lease of the lock, renewed while the job runs; default
// dblock.DefaultTTL. It bounds how long a crashed replica blocks the job.
func WithTTL(d time.Duration) Option { return func(c *config) { c.tick.TTL = d } }

// WithWait makes a replica wait up to d for the lock instead of skipping the
// run when another holds it; default 0 (skip at once). Waiting serializes
// the replicas' runs rather than deduplicating them: every replica that gets
// the lock within d runs the job, one after the other.
func WithWait(d time.Duration) Option { return func(c *config) { c.tick.Wait = d } }

// WithContext sets the context that acquisitions and jobs derive from: its
// values reach the jobs, and its end cancels them (for example on shutdown,
// with cron.Stop). Default context.Background().
func WithContext(ctx context.Context) Option { return func(c *config) { c.ctx = ctx } }

// New returns a cron.JobWrapper that runs the wrapped job only on the
// replica that takes the lock for the current tick of the job named name.
// By default the guard does not wait (TryAcquire: another replica runs this
// tick) and holds the lock at least one tick. A job adapted with Job gets
// the lock's context, canceled when the lock is lost. The lock is released
// when the job returns or panics.
//
// A name too long to fit in dblock.MaxNameLength bytes with the tick is
// shortened: its first bytes and a digest of the whole.
//
// Errors wrap dblock.ErrInvalidOption or dblock.ErrInvalidName. New also
// refuses a Locker that would refuse the guard's acquisitions at every run,
// or that keeps a row for every name when names are per tick. A forupdate
// Locker is both: it cannot hold a lock past its release (MinHold), and its
// rows are permanent. Over it, only WithTick(0) with WithMinHold(0) is
// accepted, which serializes the replicas' runs but does not deduplicate
// them; use rowlock to run each tick once.
func New(l dblock.Locker, name string, opts ...Option) (cron.JobWrapper, error) {
	cfg := config{tick: tickguard.DefaultConfig(), ctx: context.Background()}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("cronguard: %w", &dblock.OptionError{Option: "Option", Reason: "nil option"})
		}
		opt(&cfg)
	}
	if cfg.ctx == nil {
		return nil, fmt.Errorf("cronguard: %w", &dblock.OptionError{Option: "WithContext", Reason: "nil context"})
	}
	tg, err := tickguard.New(l, cfg.tick)
	if err != nil {
		return nil, fmt.Errorf("cronguard: %w", err)
	}
	if err := tickguard.ValidateBase(name); err != nil {
		return nil, err
	}
	g := &guard{tg: tg, name: name, logger: logging.Of(l), ctx: cfg.ctx}
	return func(j cron.Job) cron.Job { return guardedJob{g: g, job: j} }, nil
}

type guard struct {
	tg     *tickguard.Guard
	name   string
	logger *slog.Logger
	ctx    context.Context
}

type guardedJob struct {
	g   *guard
	job cron.Job
}

// Run is called by the scheduler at each activation.
func (j guardedJob) Run() {
	g := j.g
	base := g.ctx
	if base.Err() != nil {
		return
	}
	name, tick := g.tg.Name(g.name, time.Now())
	if !tick.IsZero() {
		base = context.WithValue(base, tickKey{}, tick)
	}
	lock, err := g.tg.Acquire(base, name)
	switch {
	case errors.Is(err, dblock.ErrNotAcquired):
		g.logger.Debug("cronguard: run skipped: lock held elsewhere", "name", name)
		return
	case err != nil:
		g.logger.Error("cronguard: run skipped: cannot take the lock", "name", name, "error", err)
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

func (g *guard) release(base context.Context, lock dblock.Lock) {
	err := g.tg.Release(base, lock)
	switch {
	case err == nil:
	case errors.Is(err, dblock.ErrLockLost):
		g.logger.Warn("cronguard: job lost its lock while running", "name", lock.Name(), "error", err)
	default:
		g.logger.Error("cronguard: releasing the lock", "name", lock.Name(), "error", err)
	}
}
