// Package tickguard is the per-job lock logic shared by the scheduler
// adapters (cronguard for robfig/cron, gocronlock for gocron): how a job's
// lock is named, how long it is held at least, its lease, how long a
// replica waits for it, and which Lockers can serve it. The adapters only
// translate their scheduler's calls into Name, Acquire and Release, so that
// a job behaves the same under either scheduler.
//
// Each job has one lock, named after the job, so a guard leaves one row per
// job in the lock table, with or without the reaper.
//
// Safety rule (docs/design.md, "Cron guards: one run per activation"): a
// run attributes its fire to the nearest activation of the job's schedule
// (Attribute). It holds the lock at least until halfway to the next
// activation. So a replica firing the same activation late (or, its clock
// ahead, early) by less than half the gap finds the lock held and skips.
// The replicas firing the next activation find it free. A run still going
// when the next activation fires keeps the lock, so that activation is
// skipped: runs of one job never overlap across replicas.
//
// A lock per activation (name@tick) would let runs overlap and would
// tolerate more spread between replicas, but leaves a row per activation
// that only a reaper removes.
package tickguard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// releaseTimeout bounds a release whose context has already ended (a
// scheduler shutting down).
const releaseTimeout = 10 * time.Second

// probeHold is the MinHold New asks the Locker about when the hold is left
// to the schedule: any positive hold is refused alike by a Locker that
// cannot hold a lock past its release.
const probeHold = time.Second

// digestLength is how many hex digits of a long job name's SHA-256 replace
// its tail: 64 bits, so two job names that differ only past the cut get
// different locks.
const digestLength = 16

// Config is a guard's settings; the adapters' options set it.
type Config struct {
	// Lock are the options of every acquisition of a job's lock
	// (WithLockOptions): dblock.TTL, and dblock.MinHold, which when absent
	// means "the default": hold until halfway to the next activation.
	Lock []dblock.Option
	Wait time.Duration
}

// DefaultConfig is the configuration before any option.
func DefaultConfig() Config { return Config{} }

// Guard takes the lock of each run of a job.
type Guard struct {
	l   dblock.Locker
	cfg Config
	// lock are cfg.Lock resolved; minHoldSet tells whether they set
	// MinHold.
	lock       dblock.Options
	minHoldSet bool
}

// unsetHold marks MinHold as not set by the options: no option sets a
// negative one that ResolveOptions accepts.
const unsetHold = -1

// resolveLock resolves opts and tells whether they set MinHold. Errors
// wrap dblock.ErrInvalidOption.
func resolveLock(opts []dblock.Option) (_ dblock.Options, minHoldSet bool, err error) {
	o, err := lockinput.ResolveOptions(opts...)
	if err != nil {
		return dblock.Options{}, false, err
	}
	probe := dblock.Options{MinHold: unsetHold}
	for _, opt := range opts {
		opt(&probe)
	}
	return o, probe.MinHold != unsetHold, nil
}

// New checks cfg and l, once, so that a configuration that would fail every
// run fails here instead: an adapter reports a run's lock errors only to a
// logger or a listener that nobody may read. Errors are *dblock.OptionError
// or wrap dblock.ErrInvalidOption; Option names the adapters' option
// (WithWait, ...), which both adapters name alike, or the Locker's.
func New(l dblock.Locker, cfg Config) (*Guard, error) {
	switch {
	case l == nil:
		return nil, &dblock.OptionError{Option: "Locker", Reason: "nil"}
	case cfg.Wait < 0:
		return nil, &dblock.OptionError{Option: "WithWait", Reason: "must not be negative"}
	}
	// Checked before the Locker is asked: a TTL out of range is the
	// option's fault, whatever the Locker.
	o, minHoldSet, err := resolveLock(cfg.Lock)
	if err != nil {
		return nil, err
	}
	g := &Guard{l: l, cfg: cfg, lock: o, minHoldSet: minHoldSet}
	hold := o.MinHold
	if !minHoldSet {
		hold = probeHold
	}
	if err := lockkit.CheckOptions(l, g.options(hold)...); err != nil {
		return nil, err
	}
	return g, nil
}

// options are the options of an acquisition held at least hold.
func (g *Guard) options(hold time.Duration) []dblock.Option {
	return append(append([]dblock.Option(nil), g.cfg.Lock...), dblock.MinHold(hold))
}

// Hold is how long a run's lock stays taken at least, from its
// acquisition: dblock.MinHold's value when set, else until windowEnd, the
// end of the activation's window (Attribute), as judged at fired. Measured
// from fired rather than from the acquisition, which comes later, the
// hold ends a little after windowEnd, never before.
func (g *Guard) Hold(fired, windowEnd time.Time) time.Duration {
	if g.minHoldSet {
		return g.lock.MinHold
	}
	return max(windowEnd.Sub(fired), 0)
}

// ValidateBase checks a job's name as lockinput.ValidateName does, but for
// its length: Name shortens long ones.
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

// Name is the lock name of the job named base: base itself when it fits in
// dblock.MaxNameLength bytes. A longer one keeps its first bytes and ends
// in "~" and 16 hex digits of the SHA-256 of the whole: long job names
// (gocron names jobs after their function) still run, and two names that
// differ only past the cut still get two locks.
func Name(base string) string { return fit(base, dblock.MaxNameLength) }

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

// Acquire takes the lock name for one run, held at least hold (Hold): at
// once (TryAcquire), or waiting up to Wait. dblock.ErrNotAcquired means
// another replica has the run.
func (g *Guard) Acquire(ctx context.Context, name string, hold time.Duration) (dblock.Lock, error) {
	opts := g.options(hold)
	if g.cfg.Wait == 0 {
		return g.l.TryAcquire(ctx, name, opts...)
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Wait)
	defer cancel()
	return g.l.Acquire(ctx, name, opts...)
}

// Release releases a run's lock, even when ctx has ended (the scheduler is
// shutting down): a lock left held would block the job's other replicas
// for nothing until its lease ran out.
func (g *Guard) Release(ctx context.Context, lock dblock.Lock) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	return lock.Release(ctx)
}
