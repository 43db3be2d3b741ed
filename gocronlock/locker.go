package gocronlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/sqllock/sqllock/dblock"
)

// DefaultTick is the tick runs are attributed to: gocron's cron jobs fire
// on whole seconds, so a second divides their activation times.
const DefaultTick = time.Second

// releaseTimeout bounds an Unlock whose context has already ended (gocron
// unlocks with the job's context, which ends on shutdown).
const releaseTimeout = 10 * time.Second

// Option configures a Locker.
type Option func(*config)

type config struct {
	tick       time.Duration
	minHold    time.Duration
	minHoldSet bool
	ttl        time.Duration
	wait       time.Duration
	prefix     string
}

// WithTick sets the resolution of the per-tick lock names; default
// DefaultTick. A run is attributed to the multiple of d nearest to when it
// fires, so replicas apart by less than d/2 agree; every scheduled time
// must be such a multiple (a second always is for cron jobs; duration jobs
// need gocron.WithStartAt aligned to d). WithTick(0) uses the job name alone:
// runs never overlap across replicas, and MinHold must then be longer than
// the offsets between replicas and shorter than the period minus them.
func WithTick(d time.Duration) Option { return func(c *config) { c.tick = d } }

// WithMinHold sets how long a lock stays taken after the run started, even
// if the run finished sooner; default the tick (DefaultTick with WithTick(0)).
func WithMinHold(d time.Duration) Option {
	return func(c *config) { c.minHold, c.minHoldSet = d, true }
}

// WithTTL sets the lease, renewed while the job runs; default
// dblock.DefaultTTL. It bounds how long a crashed replica blocks the job.
func WithTTL(d time.Duration) Option { return func(c *config) { c.ttl = d } }

// WithWait makes Lock wait up to d for a lock held by another replica
// instead of failing at once (default 0). Waiting serializes the replicas'
// runs instead of deduplicating them.
func WithWait(d time.Duration) Option { return func(c *config) { c.wait = d } }

// WithPrefix puts p before every job name, to keep the jobs of applications
// sharing a database apart (gocron names a job after its function unless
// gocron.WithName says otherwise); default "".
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// Locker implements gocron.Locker over a dblock.Locker.
type Locker struct {
	l        dblock.Locker
	cfg      config
	lockOpts []dblock.Option
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a gocron.Locker taking its locks from l. Errors wrap
// dblock.ErrInvalidOption: options out of range, and a Locker that would
// refuse every Lock (dblock.OptionChecker) or that keeps a row for every
// name (dblock.NameKeeper) with per-tick names. A forupdate Locker is
// both: it cannot hold a lock past its release (MinHold), and its rows
// are permanent; over it, only WithTick(0) with WithMinHold(0) is
// accepted, which serializes runs without deduplicating them. Use rowlock
// to run each tick once.
func NewLocker(l dblock.Locker, opts ...Option) (*Locker, error) {
	cfg := config{tick: DefaultTick, ttl: dblock.DefaultTTL}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("gocronlock: %w", &dblock.OptionError{Option: "Option", Reason: "nil option"})
		}
		opt(&cfg)
	}
	if !cfg.minHoldSet {
		cfg.minHold = cfg.tick
		if cfg.tick == 0 {
			cfg.minHold = DefaultTick
		}
	}
	var bad *dblock.OptionError
	switch {
	case l == nil:
		bad = &dblock.OptionError{Option: "Locker", Reason: "nil"}
	case cfg.tick < 0:
		bad = &dblock.OptionError{Option: "WithTick", Reason: "must not be negative"}
	case cfg.wait < 0:
		bad = &dblock.OptionError{Option: "WithWait", Reason: "must not be negative"}
	}
	if bad != nil {
		return nil, fmt.Errorf("gocronlock: %w", bad)
	}
	lockOpts := []dblock.Option{dblock.TTL(cfg.ttl), dblock.MinHold(cfg.minHold)}
	if _, err := dblock.ResolveOptions(lockOpts...); err != nil {
		return nil, fmt.Errorf("gocronlock: %w", err)
	}
	// Refused here rather than at every run, where gocron would skip the
	// job each time and report it only to an AfterLockError listener.
	if k, ok := l.(dblock.NameKeeper); ok && k.KeepsNames() && cfg.tick > 0 {
		return nil, fmt.Errorf("gocronlock: %w", &dblock.OptionError{Option: "WithTick",
			Reason: fmt.Sprintf("the Locker (%T) keeps a row for every name it locks, and per-tick names would leave one per tick: use WithTick(0), or a Locker with leases (rowlock)", l)})
	}
	if err := dblock.CheckOptions(l, lockOpts...); err != nil {
		return nil, fmt.Errorf("gocronlock: %w", err)
	}
	return &Locker{l: l, cfg: cfg, lockOpts: lockOpts}, nil
}

// Lock takes the lock of this tick of the job key (gocron passes the job's
// name). It fails with an error wrapping dblock.ErrNotAcquired when another
// replica has it, and gocron then skips the run.
func (x *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	name := x.cfg.prefix + key
	if x.cfg.tick > 0 {
		name += "@" + time.Now().Round(x.cfg.tick).UTC().Format(time.RFC3339Nano)
	}
	var lock dblock.Lock
	var err error
	if x.cfg.wait == 0 {
		lock, err = x.l.TryAcquire(ctx, name, x.lockOpts...)
	} else {
		waitCtx, cancel := context.WithTimeout(ctx, x.cfg.wait)
		lock, err = x.l.Acquire(waitCtx, name, x.lockOpts...)
		cancel()
	}
	if err != nil {
		return nil, fmt.Errorf("gocronlock: %q: %w", name, err)
	}
	return unlocker{lock}, nil
}

type unlocker struct{ lock dblock.Lock }

// Unlock releases the lock (it stays taken until MinHold has passed). It
// returns dblock.ErrNotHeld on a second call, and an error wrapping
// dblock.ErrLockLost if the lock was lost while the job ran.
func (u unlocker) Unlock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	err := u.lock.Release(ctx)
	if err != nil && !errors.Is(err, dblock.ErrNotHeld) {
		return fmt.Errorf("gocronlock: %w", err)
	}
	return err
}
