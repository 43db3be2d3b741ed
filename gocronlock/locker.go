package gocronlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/tickguard"
)

// FirstHold is how long a job's lock is held at least after the first run
// a Locker has seen of it: gocron tells a Locker nothing of the job's
// schedule, so the Locker learns its period from the gaps between runs,
// and has none before the second. Half a second is half the shortest
// period of a gocron cron job, so it never holds the lock into the next
// run; but a replica firing a job's first run more than half a second
// after the first replica did runs it again.
const FirstHold = 500 * time.Millisecond

// Option configures a Locker. WithLockOptions and WithWait mean what
// cronguard's options of the same names mean.
type Option func(*config)

type config struct {
	tick   tickguard.Config
	prefix string
}

// WithLockOptions sets the options of every acquisition of a job's lock,
// the dblock options:
//   - dblock.TTL, the lease, renewed while the job runs; default
//     dblock.DefaultTTL. It bounds how long a crashed replica blocks the
//     job.
//   - dblock.MinHold, how long the lock stays taken at least after a run
//     started, even if the run finished sooner. Default: half the shortest
//     gap this Locker has seen between two runs of the job (halfway to the
//     next run), and FirstHold after its first run. Set it to half the
//     job's period to cover the first run too. dblock.MinHold(0) releases
//     at the end of the run: runs are then serialized, not deduplicated.
//   - dblock.Note and dblock.Fair, passed on as given.
func WithLockOptions(opts ...dblock.Option) Option {
	return func(c *config) { c.tick.Lock = append(c.tick.Lock, opts...) }
}

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

	mu   sync.Mutex
	runs map[string]runHistory // by job name, with the prefix
}

// runHistory is what a Locker has seen of a job's runs: when the last one
// fired, and the shortest gap between two (0 before the second).
type runHistory struct {
	last   time.Time
	minGap time.Duration
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a gocron.Locker taking its locks from l. Errors wrap
// dblock.ErrInvalidOption: options out of range, and a Locker that would
// refuse every Lock. A forupdate Locker cannot hold a lock past its
// release: over it, only WithLockOptions(dblock.MinHold(0)) is accepted, which serializes runs
// without deduplicating them. Use rowlock to run each run once.
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
	return &Locker{tg: tg, prefix: cfg.prefix, runs: map[string]runHistory{}}, nil
}

// Lock takes the lock of the job key (gocron passes the job's name) for
// this run. It fails with an error wrapping dblock.ErrNotAcquired when
// another replica has it, and gocron then skips the run. A prefix and key
// too long to fit in dblock.MaxNameLength bytes are shortened: their first
// bytes and a digest of the whole.
func (x *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	base := x.prefix + key
	if err := tickguard.ValidateBase(base); err != nil {
		return nil, fmt.Errorf("gocronlock: %w", err)
	}
	// gocron's own clock, which schedules the runs: their gaps are
	// measured on it.
	fired := time.Now()
	name := tickguard.Name(base)
	lock, err := x.tg.Acquire(ctx, name, x.tg.Hold(fired, fired.Add(x.halfGap(base, fired))))
	if err != nil {
		return nil, fmt.Errorf("gocronlock: %q: %w", name, err)
	}
	return unlocker{tg: x.tg, lock: lock}, nil
}

// halfGap records a run of the job base fired at fired and returns half
// the shortest gap seen between its runs, or FirstHold before there is
// one. The shortest gap is never more than the gap to the next run, so
// the lock is free again when that run fires, even after runs this
// replica skipped.
func (x *Locker) halfGap(base string, fired time.Time) time.Duration {
	x.mu.Lock()
	defer x.mu.Unlock()
	h := x.runs[base]
	if !h.last.IsZero() {
		if gap := fired.Sub(h.last); gap > 0 && (h.minGap == 0 || gap < h.minGap) {
			h.minGap = gap
		}
	}
	h.last = fired
	x.runs[base] = h
	if h.minGap == 0 {
		return FirstHold
	}
	return h.minGap / 2
}

type unlocker struct {
	tg   *tickguard.Guard
	lock dblock.Lock
}

// Unlock releases the lock (it stays taken until its hold has passed). It
// returns dblock.ErrNotHeld on a second call, and an error wrapping
// dblock.ErrLockLost if the lock was lost while the job ran.
func (u unlocker) Unlock(ctx context.Context) error {
	err := u.tg.Release(ctx, u.lock)
	if err != nil && !errors.Is(err, dblock.ErrNotHeld) {
		return fmt.Errorf("gocronlock: %w", err)
	}
	return err
}
