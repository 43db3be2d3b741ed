package gocronlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/tickguard"
)

// DefaultTick is the tick runs are attributed to: gocron's cron jobs fire
// on whole seconds, so a second divides their activation times.
const DefaultTick = tickguard.DefaultTick

// Option configures a Locker. WithTick, WithMinHold, WithTTL and WithWait
// mean what cronguard's options of the same names mean.
type Option func(*config)

type config struct {
	tick   tickguard.Config
	prefix string
}

// WithTick sets the resolution of the per-tick lock names; default
// DefaultTick. A run is attributed to the multiple of d nearest to when it
// fires, so replicas apart by less than d/2 agree; every scheduled time
// must be such a multiple (a second always is for cron jobs; duration jobs
// need gocron.WithStartAt aligned to d). WithTick(0) uses the job name alone:
// runs never overlap across replicas, and MinHold must then be longer than
// the offsets between replicas and shorter than the period minus them.
func WithTick(d time.Duration) Option { return func(c *config) { c.tick.Tick = d } }

// WithMinHold sets how long a lock stays taken after the run started, even
// if the run finished sooner; default the tick (DefaultTick with WithTick(0)).
func WithMinHold(d time.Duration) Option {
	return func(c *config) { c.tick.MinHold, c.tick.MinHoldSet = d, true }
}

// WithTTL sets the lease, renewed while the job runs; default
// dblock.DefaultTTL. It bounds how long a crashed replica blocks the job.
func WithTTL(d time.Duration) Option { return func(c *config) { c.tick.TTL = d } }

// WithWait makes Lock wait up to d for a lock held by another replica
// instead of failing at once (default 0). Waiting serializes the replicas'
// runs instead of deduplicating them.
func WithWait(d time.Duration) Option { return func(c *config) { c.tick.Wait = d } }

// WithPrefix puts p before every job name, to keep the jobs of applications
// sharing a database apart (gocron names a job after its function unless
// gocron.WithName says otherwise); default "".
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// Locker implements gocron.Locker over a dblock.Locker.
type Locker struct {
	tg     *tickguard.Guard
	prefix string
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a gocron.Locker taking its locks from l. Errors wrap
// dblock.ErrInvalidOption: options out of range, and a Locker that would
// refuse every Lock or that keeps a row for every name with per-tick names.
// A forupdate Locker is both: it cannot hold a lock past its release
// (MinHold), and its rows are permanent; over it, only WithTick(0) with
// WithMinHold(0) is accepted, which serializes runs without deduplicating
// them. Use rowlock to run each tick once.
func NewLocker(l dblock.Locker, opts ...Option) (*Locker, error) {
	cfg := config{tick: tickguard.DefaultConfig()}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("gocronlock: %w", &dblock.OptionError{Option: "Option", Reason: "nil option"})
		}
		opt(&cfg)
	}
	tg, err := tickguard.New(l, cfg.tick)
	if err != nil {
		return nil, fmt.Errorf("gocronlock: %w", err)
	}
	return &Locker{tg: tg, prefix: cfg.prefix}, nil
}

// Lock takes the lock of this tick of the job key (gocron passes the job's
// name). It fails with an error wrapping dblock.ErrNotAcquired when another
// replica has it, and gocron then skips the run. A prefix and key too long
// to fit in dblock.MaxNameLength bytes with the tick are shortened: their
// first bytes and a digest of the whole.
func (x *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	base := x.prefix + key
	if err := tickguard.ValidateBase(base); err != nil {
		return nil, fmt.Errorf("gocronlock: %w", err)
	}
	name, _ := x.tg.Name(base, time.Now())
	lock, err := x.tg.Acquire(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("gocronlock: %q: %w", name, err)
	}
	return unlocker{tg: x.tg, lock: lock}, nil
}

type unlocker struct {
	tg   *tickguard.Guard
	lock dblock.Lock
}

// Unlock releases the lock (it stays taken until MinHold has passed). It
// returns dblock.ErrNotHeld on a second call, and an error wrapping
// dblock.ErrLockLost if the lock was lost while the job ran.
func (u unlocker) Unlock(ctx context.Context) error {
	err := u.tg.Release(ctx, u.lock)
	if err != nil && !errors.Is(err, dblock.ErrNotHeld) {
		return fmt.Errorf("gocronlock: %w", err)
	}
	return err
}
