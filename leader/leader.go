package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// DefaultBackoff is how long a Leader pauses before campaigning again after
// its function returned or an acquisition failed.
const DefaultBackoff = time.Second

// releaseTimeout bounds the release of the leadership after ctx ended.
const releaseTimeout = 10 * time.Second

// Option configures a Leader.
type Option func(*config)

type config struct {
	lock            []dblock.Option
	backoff         time.Duration
	value           string
	observeInterval time.Duration
	resignPause     time.Duration
	logger          *slog.Logger
}

// WithLockOptions sets the options of the leadership lock's acquisitions,
// the dblock options. dblock.TTL is the lease; default dblock.DefaultTTL.
// When the leader's process dies, another replica takes over within about
// one TTL; a leader cut off from the database steps down (its function's
// context is canceled) before the lease could lapse. dblock.Fair and
// dblock.MinHold are passed on as given; the note is WithValue's.
func WithLockOptions(opts ...dblock.Option) Option {
	return func(c *config) { c.lock = append(c.lock, opts...) }
}

// WithBackoff sets the pause before campaigning again after the function
// returned on its own or an acquisition failed; default DefaultBackoff.
// After losing the lock a Leader campaigns again at once.
func WithBackoff(d time.Duration) Option { return func(c *config) { c.backoff = d } }

// WithValue sets what this replica advertises while it leads, such as the
// address followers should send their writes to; default "". It is kept
// as the leadership lock's note (dblock.Note: at most dblock.MaxNoteLength
// bytes of UTF-8, no NUL), which Leader and Observe read.
func WithValue(v string) Option { return func(c *config) { c.value = v } }

// WithObserveInterval sets how often Observe asks who leads; default
// DefaultObserveInterval.
func WithObserveInterval(d time.Duration) Option { return func(c *config) { c.observeInterval = d } }

// WithLogger sets where the Leader logs. Default: where its Locker logs
// (rowlock.WithLogger, forupdate.WithLogger); for a Locker of another
// kind, slog.Default() at Warn and above.
func WithLogger(logger *slog.Logger) Option { return func(c *config) { c.logger = logger } }

// WithResignPause sets how long Run waits after Resign before campaigning
// again; default DefaultResignPause.
func WithResignPause(d time.Duration) Option { return func(c *config) { c.resignPause = d } }

// Leader elects one leader among replicas by holding the lock name, and runs
// a function while it leads. Create it with New and call Run; its methods
// are safe to call from any goroutine. A replica that only follows calls
// Leader or Observe on a Leader it never runs.
type Leader struct {
	l       dblock.Locker
	name    string
	fn      func(ctx context.Context) error
	acquire []dblock.Option // the leadership lock's TTL and note
	cfg     config
	running atomic.Bool
	term    atomic.Pointer[leaderTerm] // nil while not leading
}

// leaderTerm is one hold of the leadership.
type leaderTerm struct {
	lock dblock.Lock
	// end cancels the function's context.
	end context.CancelCauseFunc
	// state is termActive until the term ends: termResigned when Resign
	// ended it, termOver otherwise.
	state atomic.Int32
	// released is closed once the lock is released; releaseErr is then
	// what Resign reports.
	released   chan struct{}
	releaseErr error
}

// New returns a Leader that campaigns for name with l and runs fn while it
// leads. fn may be nil: the Leader then only holds the leadership, for code
// that asks IsLeader. Errors wrap dblock.ErrInvalidOption or
// dblock.ErrInvalidName; a Locker that would refuse the leadership lock's
// options at every campaign (forupdate refuses none of them) is refused here.
func New(l dblock.Locker, name string, fn func(ctx context.Context) error, opts ...Option) (*Leader, error) {
	cfg := config{
		backoff: DefaultBackoff, observeInterval: DefaultObserveInterval,
		resignPause: DefaultResignPause, logger: lockkit.LoggerOf(l),
	}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("leader: New: %w", &dblock.OptionError{Option: "Option", Reason: "nil option"})
		}
		opt(&cfg)
	}
	var bad *dblock.OptionError
	switch {
	case l == nil:
		bad = &dblock.OptionError{Option: "Locker", Reason: "nil"}
	case cfg.logger == nil:
		bad = &dblock.OptionError{Option: "WithLogger", Reason: "nil logger"}
	case cfg.backoff <= 0:
		bad = &dblock.OptionError{Option: "WithBackoff", Reason: "must be positive"}
	case cfg.observeInterval <= 0:
		bad = &dblock.OptionError{Option: "WithObserveInterval", Reason: "must be positive"}
	case cfg.resignPause <= 0:
		bad = &dblock.OptionError{Option: "WithResignPause", Reason: "must be positive"}
	}
	if bad != nil {
		return nil, fmt.Errorf("leader: New: %w", bad)
	}
	// Asked once here (lockkit.Capabilities): Run would otherwise only find out
	// at its first campaign.
	acquire := append(append([]dblock.Option(nil), cfg.lock...), dblock.Note(cfg.value))
	if err := lockkit.CheckOptions(l, acquire...); err != nil {
		return nil, fmt.Errorf("leader: New: %w", err)
	}
	if err := lockinput.ValidateName(name); err != nil {
		return nil, err
	}
	return &Leader{l: l, name: name, fn: fn, acquire: acquire, cfg: cfg}, nil
}

// Run campaigns until ctx ends. Each time it wins the lock it runs fn with a
// context canceled when the leadership is lost or ctx ends, and releases the
// lock when fn returns. After losing the lock it campaigns again at once;
// after fn returned on its own (an error is logged) it steps down and
// campaigns again after the backoff, giving other replicas their turn;
// after Resign it waits for the resign pause.
// Acquisition errors are logged and retried after the backoff.
//
// fn must return promptly once its context is canceled: Run waits for it
// before releasing the lock. Run returns ctx.Err() once ctx has ended, fn
// has returned and the lock has been released. It returns earlier only for errors that retrying cannot
// mend: dblock.ErrClosed, ErrSchemaMissing, ErrInvalidDB, ErrUnknownDialect,
// ErrInvalidName, ErrInvalidOption; and when Run is already running. Run
// starts no goroutines of its own: fn runs on the caller's.
func (ld *Leader) Run(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("leader: Run: %w", &dblock.OptionError{Option: "ctx", Reason: "nil context"})
	}
	if !ld.running.CompareAndSwap(false, true) {
		return fmt.Errorf("leader: %q: Run called while already running", ld.name)
	}
	defer ld.running.Store(false)
	for {
		lock, err := ld.l.Acquire(ctx, ld.name, ld.acquire...)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if permanent(err) {
				return err
			}
			ld.cfg.logger.Error("leader: leader campaign failed; retrying", "name", ld.name, "error", err)
			if !sleepCtx(ctx, ld.cfg.backoff) {
				return ctx.Err()
			}
			continue
		}
		pause := ld.lead(ctx, lock)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if pause > 0 && !sleepCtx(ctx, pause) {
			return ctx.Err()
		}
	}
}

// lead runs one term: fn under lock, then the release. It returns how
// long to wait before campaigning again: the backoff when fn returned while
// the lock was still held, the resign pause after Resign, 0 otherwise.
func (ld *Leader) lead(ctx context.Context, lock dblock.Lock) (pause time.Duration) {
	runCtx, cancel := context.WithCancelCause(lock.Context())
	t := &leaderTerm{lock: lock, end: cancel, released: make(chan struct{})}
	runCtx = context.WithValue(runCtx, termKey{}, t)
	ld.term.Store(t)
	ld.cfg.logger.Info("leader: elected leader", "name", ld.name, "token", lock.Token())
	stop := context.AfterFunc(ctx, func() { cancel(nil) })
	// Deferred, so that a panicking fn does not leave the lock held (and
	// renewed) while the panic unwinds.
	defer func() {
		stop()
		cancel(nil)
		t.state.CompareAndSwap(termActive, termOver)
		ld.term.Store(nil)
		relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer relCancel()
		err := lock.Release(relCtx)
		if err != nil && !errors.Is(err, dblock.ErrLockLost) {
			ld.cfg.logger.Error("leader: releasing leadership", "name", ld.name, "error", err)
		}
		t.releaseErr = releaseError(ld.name, err)
		close(t.released)
	}()

	var fnErr error
	if ld.fn == nil {
		<-runCtx.Done()
	} else {
		fnErr = ld.fn(runCtx)
	}
	resigned := !t.state.CompareAndSwap(termActive, termOver)
	switch lost := lock.Err(); {
	case resigned:
		ld.cfg.logger.Info("leader: leader resigned", "name", ld.name, "token", lock.Token(), "fn_error", fnErr)
		pause = ld.cfg.resignPause
	case lost != nil:
		ld.cfg.logger.Warn("leader: leadership lost", "name", ld.name, "token", lock.Token(), "error", lost, "fn_error", fnErr)
	case ctx.Err() != nil:
		ld.cfg.logger.Info("leader: leader stopping", "name", ld.name, "token", lock.Token())
	case fnErr != nil:
		ld.cfg.logger.Error("leader: leader function failed; stepping down", "name", ld.name, "token", lock.Token(), "error", fnErr)
		pause = ld.cfg.backoff
	default:
		ld.cfg.logger.Info("leader: leader function returned; stepping down", "name", ld.name, "token", lock.Token())
		pause = ld.cfg.backoff
	}
	return pause
}

// IsLeader reports whether this replica holds the leadership now. It turns
// false as soon as the lock is lost or Resign is called, before another
// replica can win it; to
// guard writes against a pause between asking and writing, fence them with
// the Lock's token or dblock.Fencer.CheckHeld.
func (ld *Leader) IsLeader() bool {
	t := ld.term.Load()
	if t == nil || t.state.Load() != termActive {
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
func (ld *Leader) Lock() dblock.Lock {
	if t := ld.term.Load(); t != nil {
		return t.lock
	}
	return nil
}

// permanent reports errors that campaigning again cannot mend.
func permanent(err error) bool {
	for _, target := range []error{dblock.ErrClosed, dblock.ErrSchemaMissing, dblock.ErrInvalidDB, dblock.ErrUnknownDialect, dblock.ErrInvalidName, dblock.ErrInvalidOption} {
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
