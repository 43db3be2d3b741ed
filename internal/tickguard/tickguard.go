// Package tickguard is the per-tick lock logic shared by the scheduler
// adapters (cronguard for robfig/cron, gocronlock for gocron): how a run is
// named after its tick, how long its lock is held at least, its lease, how
// long a replica waits for it, and which Lockers can serve it. The adapters
// only translate their scheduler's calls into Name, Acquire and Release, so
// that a job behaves the same under either scheduler.
//
// Each tick has its own lock, base@tick (for example
// "jobs/report@2025-01-02T03:04:05Z"): a replica firing that tick later, by
// clock skew or a slow scheduler, finds it taken for MinHold and skips.
// Per-tick names make "each tick exactly once" hold for any job duration and
// any period, as long as replicas fire within half a tick of the schedule.
// With a single name and MinHold instead, MinHold would have to exceed the
// offsets between replicas yet stay below the period minus them, and a run
// longer than the period would swallow the next tick. The cost is one row
// per tick in the lock table: released rows stay until the reaper sweeps
// them.
package tickguard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// DefaultTick is the tick runs are attributed to: robfig/cron and gocron's
// cron jobs fire on whole seconds, so a second always divides their
// activation times.
const DefaultTick = time.Second

// releaseTimeout bounds a release whose context has already ended (a
// scheduler shutting down).
const releaseTimeout = 10 * time.Second

// tickLayout formats ticks in lock names: UTC, sub-second digits only when
// the tick has them. maxTickSuffix is the longest suffix it makes.
const (
	tickLayout    = time.RFC3339Nano
	maxTickSuffix = len("@2006-01-02T15:04:05.999999999Z")
)

// digestLength is how many hex digits of a long base name's SHA-256 replace
// its tail: 64 bits, so two job names that differ only past the cut get
// different locks.
const digestLength = 16

// Config is a guard's settings; the adapters' options set it. Zero
// MinHold with MinHoldSet false means "the default": one tick.
type Config struct {
	Tick       time.Duration
	MinHold    time.Duration
	MinHoldSet bool
	TTL        time.Duration
	Wait       time.Duration
}

// DefaultConfig is the configuration before any option.
func DefaultConfig() Config { return Config{Tick: DefaultTick, TTL: dblock.DefaultTTL} }

// Guard takes the lock of each run of a job.
type Guard struct {
	l        dblock.Locker
	cfg      Config
	lockOpts []dblock.Option
}

// New checks cfg and l, once, so that a configuration that would fail every
// run fails here instead: an adapter reports a run's lock errors only to a
// logger or a listener that nobody may read. Errors are *dblock.OptionError
// or wrap dblock.ErrInvalidOption; Option names the adapters' option
// (WithTick, WithWait, ...), which both adapters name alike.
func New(l dblock.Locker, cfg Config) (*Guard, error) {
	if !cfg.MinHoldSet {
		cfg.MinHold = cfg.Tick
		if cfg.Tick == 0 {
			cfg.MinHold = DefaultTick
		}
	}
	switch {
	case l == nil:
		return nil, &dblock.OptionError{Option: "Locker", Reason: "nil"}
	case cfg.Tick < 0:
		return nil, &dblock.OptionError{Option: "WithTick", Reason: "must not be negative"}
	case cfg.Wait < 0:
		return nil, &dblock.OptionError{Option: "WithWait", Reason: "must not be negative"}
	}
	lockOpts := []dblock.Option{dblock.TTL(cfg.TTL), dblock.MinHold(cfg.MinHold)}
	// Checked before the Locker is asked: a TTL out of range is the
	// option's fault, whatever the Locker.
	if _, err := lockinput.ResolveOptions(lockOpts...); err != nil {
		return nil, err
	}
	if cfg.Tick > 0 && lockkit.KeepsNames(l) {
		return nil, &dblock.OptionError{Option: "WithTick",
			Reason: fmt.Sprintf("the Locker (%T) keeps a row for every name it locks, and per-tick names would leave one per tick: use WithTick(0), or a Locker with leases (rowlock)", l)}
	}
	if err := lockkit.CheckOptions(l, lockOpts...); err != nil {
		return nil, err
	}
	return &Guard{l: l, cfg: cfg, lockOpts: lockOpts}, nil
}

// ValidateBase checks a job's base name as lockinput.ValidateName does, but
// for its length: Name shortens long ones.
func ValidateBase(base string) error {
	if len(base) <= dblock.MaxNameLength {
		return lockinput.ValidateName(base)
	}
	// What a name may not hold is refused wherever it is, past the cut too.
	if !utf8.ValidString(base) || strings.IndexByte(base, 0) >= 0 {
		return &dblock.NameError{Name: base, Reason: "not valid UTF-8, or contains a NUL byte"}
	}
	return nil
}

// Name is the lock name of a run of base fired at fired, and its tick: the
// multiple of Tick nearest to fired, so that replicas apart by less than
// Tick/2 agree (zero with Tick 0, where every run shares the name base).
//
// A name that would not fit in dblock.MaxNameLength bytes with its tick
// keeps its first bytes and ends in "~" and 16 hex digits of the SHA-256 of
// the whole base: long job names (gocron names jobs after their function)
// still run, and two names that differ only past the cut still get two
// locks.
func (g *Guard) Name(base string, fired time.Time) (name string, tick time.Time) {
	suffix := ""
	if g.cfg.Tick > 0 {
		tick = fired.Round(g.cfg.Tick).UTC()
		suffix = "@" + tick.Format(tickLayout)
	}
	return fit(base, dblock.MaxNameLength-len(suffix)) + suffix, tick
}

// fit returns base when it has at most limit bytes, else its shortened form.
func fit(base string, limit int) string {
	if len(base) <= limit {
		return base
	}
	sum := sha256.Sum256([]byte(base))
	tail := "~" + hex.EncodeToString(sum[:])[:digestLength]
	return base[:shortCut(base, limit-len(tail))] + tail
}

// shortCut is the longest prefix length of s, at most n, that does not
// split a UTF-8 sequence.
func shortCut(s string, n int) int {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// Acquire takes the lock name for one run: at once (TryAcquire), or waiting
// up to Wait. dblock.ErrNotAcquired means another replica has the run.
func (g *Guard) Acquire(ctx context.Context, name string) (dblock.Lock, error) {
	if g.cfg.Wait == 0 {
		return g.l.TryAcquire(ctx, name, g.lockOpts...)
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Wait)
	defer cancel()
	return g.l.Acquire(ctx, name, g.lockOpts...)
}

// Release releases a run's lock, even when ctx has ended (the scheduler is
// shutting down): a lock left held would block the tick's other replicas
// for nothing until its lease ran out.
func (g *Guard) Release(ctx context.Context, lock dblock.Lock) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	return lock.Release(ctx)
}
