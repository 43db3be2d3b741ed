package dblock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// DefaultLeaderBackoff is how long a Leader pauses before campaigning again
// after its function returned or an acquisition failed.
const DefaultLeaderBackoff = time.Second

// LeaderOption configures a Leader.
type LeaderOption func(*leaderConfig)

type leaderConfig struct {
	ttl     time.Duration
	backoff time.Duration
	logger  *slog.Logger
}

// LeaderTTL sets the lease of the leadership lock; default DefaultTTL. When
// the leader's process dies, another replica takes over within about one TTL;
// a leader cut off from the database steps down (its function's context is
// canceled) before the lease could lapse.
func LeaderTTL(d time.Duration) LeaderOption { return func(c *leaderConfig) { c.ttl = d } }

// LeaderBackoff sets the pause before campaigning again after the function
// returned on its own or an acquisition failed; default DefaultLeaderBackoff.
// After losing the lock a Leader campaigns again at once.
func LeaderBackoff(d time.Duration) LeaderOption { return func(c *leaderConfig) { c.backoff = d } }

// LeaderLogger sets where the Leader reports elections (Info), lost
// leadership (Warn) and errors (Error); default nowhere.
func LeaderLogger(l *slog.Logger) LeaderOption { return func(c *leaderConfig) { c.logger = l } }

// Leader elects one leader among replicas by holding the lock name, and runs
// a function while it leads. Create it with NewLeader and call Run; it is
// safe to ask IsLeader from any goroutine.
type Leader struct {
	l       Locker
	name    string
	fn      func(ctx context.Context) error
	ttl     Option
	cfg     leaderConfig
	running atomic.Bool
	term    atomic.Pointer[leaderTerm] // nil while not leading
}

type leaderTerm struct{ lock Lock }

// NewLeader returns a Leader that campaigns for name with l and runs fn while
// it leads. fn may be nil: the Leader then only holds the leadership, for
// code that asks IsLeader. Errors wrap ErrInvalidOption or ErrInvalidName.
func NewLeader(l Locker, name string, fn func(ctx context.Context) error, opts ...LeaderOption) (*Leader, error) {
	cfg := leaderConfig{ttl: DefaultTTL, backoff: DefaultLeaderBackoff, logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("dblock: NewLeader: %w", &OptionError{Option: "LeaderOption", Reason: "nil option"})
		}
		opt(&cfg)
	}
	var bad *OptionError
	switch {
	case l == nil:
		bad = &OptionError{Option: "Locker", Reason: "nil"}
	case cfg.backoff <= 0:
		bad = &OptionError{Option: "LeaderBackoff", Reason: "must be positive"}
	case cfg.logger == nil:
		bad = &OptionError{Option: "LeaderLogger", Reason: "nil logger"}
	}
	if bad != nil {
		return nil, fmt.Errorf("dblock: NewLeader: %w", bad)
	}
	// Asked once here (OptionChecker): Run would otherwise only find out
	// at its first campaign.
	if err := CheckOptions(l, TTL(cfg.ttl)); err != nil {
		return nil, fmt.Errorf("dblock: NewLeader: %w", err)
	}
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	return &Leader{l: l, name: name, fn: fn, ttl: TTL(cfg.ttl), cfg: cfg}, nil
}

// Campaign is NewLeader followed by Run: it runs fn whenever this replica
// leads, until ctx ends.
func Campaign(ctx context.Context, l Locker, name string, fn func(ctx context.Context) error, opts ...LeaderOption) error {
	ld, err := NewLeader(l, name, fn, opts...)
	if err != nil {
		return err
	}
	return ld.Run(ctx)
}

// Run campaigns until ctx ends. Each time it wins the lock it runs fn with a
// context canceled when the leadership is lost or ctx ends, and releases the
// lock when fn returns. After losing the lock it campaigns again at once;
// after fn returned on its own (an error is logged) it steps down and
// campaigns again after the backoff, giving other replicas their turn.
// Acquisition errors are logged and retried after the backoff.
//
// fn must return promptly once its context is canceled: Run waits for it
// before releasing the lock. Run returns ctx.Err() once ctx has ended, fn
// has returned and the lock has been released. It returns earlier only for errors that retrying cannot
// mend: ErrClosed, ErrSchemaMissing, ErrInvalidDB, ErrUnknownDialect,
// ErrInvalidName, ErrInvalidOption; and when Run is already running. Run
// starts no goroutines of its own: fn runs on the caller's.
func (ld *Leader) Run(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("dblock: Leader.Run: %w", &OptionError{Option: "ctx", Reason: "nil context"})
	}
	if !ld.running.CompareAndSwap(false, true) {
		return fmt.Errorf("dblock: Leader %q: Run called while already running", ld.name)
	}
	defer ld.running.Store(false)
	for {
		lock, err := ld.l.Acquire(ctx, ld.name, ld.ttl)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if permanent(err) {
				return err
			}
			ld.cfg.logger.Error("dblock: leader campaign failed; retrying", "name", ld.name, "error", err)
			if !sleepCtx(ctx, ld.cfg.backoff) {
				return ctx.Err()
			}
			continue
		}
		steppedDown := ld.lead(ctx, lock)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if steppedDown && !sleepCtx(ctx, ld.cfg.backoff) {
			return ctx.Err()
		}
	}
}

// lead runs one term: fn under lock, then the release. It reports whether
// the term ended because fn returned while the lock was still held.
func (ld *Leader) lead(ctx context.Context, lock Lock) (steppedDown bool) {
	ld.term.Store(&leaderTerm{lock: lock})
	ld.cfg.logger.Info("dblock: elected leader", "name", ld.name, "token", lock.Token())
	runCtx, cancel := context.WithCancel(lock.Context())
	stop := context.AfterFunc(ctx, cancel)
	// Deferred, so that a panicking fn does not leave the lock held (and
	// renewed) while the panic unwinds.
	defer func() {
		stop()
		cancel()
		ld.term.Store(nil)
		relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer relCancel()
		if err := lock.Release(relCtx); err != nil && !errors.Is(err, ErrLockLost) {
			ld.cfg.logger.Error("dblock: releasing leadership", "name", ld.name, "error", err)
		}
	}()

	var fnErr error
	if ld.fn == nil {
		<-runCtx.Done()
	} else {
		fnErr = ld.fn(runCtx)
	}
	switch lost := lock.Err(); {
	case lost != nil:
		ld.cfg.logger.Warn("dblock: leadership lost", "name", ld.name, "token", lock.Token(), "error", lost, "fn_error", fnErr)
	case ctx.Err() != nil:
		ld.cfg.logger.Info("dblock: leader stopping", "name", ld.name, "token", lock.Token())
	case fnErr != nil:
		ld.cfg.logger.Error("dblock: leader function failed; stepping down", "name", ld.name, "token", lock.Token(), "error", fnErr)
		steppedDown = true
	default:
		ld.cfg.logger.Info("dblock: leader function returned; stepping down", "name", ld.name, "token", lock.Token())
		steppedDown = true
	}
	return steppedDown
}

// IsLeader reports whether this replica holds the leadership now. It turns
// false as soon as the lock is lost, before another replica can win it; to
// guard writes against a pause between asking and writing, fence them with
// the Lock's token or Fencer.CheckHeld.
func (ld *Leader) IsLeader() bool {
	t := ld.term.Load()
	if t == nil {
		return false
	}
	select {
	case <-t.lock.Done():
		return false
	default:
		return true
	}
}

// Lock returns the lock held in the current term, or nil when not leading:
// its Token fences writes, its Done is closed when the term ends.
func (ld *Leader) Lock() Lock {
	if t := ld.term.Load(); t != nil {
		return t.lock
	}
	return nil
}

// permanent reports errors that campaigning again cannot mend.
func permanent(err error) bool {
	for _, target := range []error{ErrClosed, ErrSchemaMissing, ErrInvalidDB, ErrUnknownDialect, ErrInvalidName, ErrInvalidOption} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// sleepCtx waits d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
