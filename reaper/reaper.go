package reaper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/metrics"
	"github.com/sqllock/sqllock/internal/rowops"
	"github.com/sqllock/sqllock/rowlock"
)

// Reaper deletes lapsed lock rows and dead waiters, now (RunOnce) or on a
// schedule (Start). It is safe for concurrent use.
type Reaper struct {
	locker   *rowlock.Locker
	ops      rowops.Ops // the Locker's sweeps and waiter table
	cfg      config
	schedule cron.Schedule
	// logger is the Locker's: a summary of each sweep at Info (Debug when
	// it deleted nothing), failed sweeps at Error.
	logger *slog.Logger
	// metrics go to the Locker's meter provider: sweeps by
	// outcome, rows deleted.
	metrics *metrics.Instruments

	mu   sync.Mutex
	cron *cron.Cron    // non-nil between Start and Stop
	stop chan struct{} // closed by Stop: the scheduled sweep in flight ends after its batch

	// sweeping, when set (by tests), is called with true when a sweep
	// starts under the reaper lock and with false when it ends.
	sweeping func(bool)
}

// Result counts what one sweep deleted.
type Result struct {
	// Locks is the number of lapsed lock rows deleted.
	Locks int
	// Waiters is the number of dead waiters deleted.
	Waiters int
	// Semaphores is the number of semaphore limits deleted: those of
	// names with no permit held (rowlock.Locker.Semaphore).
	Semaphores int
	// Skipped is true when another reaper held the reaper lock, so this
	// one did nothing.
	Skipped bool
}

// New returns a Reaper that sweeps the tables of locker's database through
// locker, which must stay open while the reaper runs. It logs to locker's
// logger and measures with locker's meter provider (rowlock.WithLogger,
// rowlock.WithMeterProvider). New does no I/O.
func New(locker *rowlock.Locker, opts ...Option) (*Reaper, error) {
	if locker == nil {
		return nil, fmt.Errorf("reaper: %w", &dblock.OptionError{Option: "locker", Reason: "nil *rowlock.Locker"})
	}
	cfg := config{
		schedule:  DefaultSchedule,
		batchSize: DefaultBatchSize,
		grace:     DefaultGrace,
		lockName:  DefaultLockName,
	}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("reaper: %w", &dblock.OptionError{Option: "Option", Reason: "nil option"})
		}
		opt(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	schedule, err := cron.ParseStandard(cfg.schedule)
	if err != nil {
		return nil, fmt.Errorf("reaper: %w", &dblock.OptionError{Option: "WithSchedule", Reason: fmt.Sprintf("%q: %v", cfg.schedule, err)})
	}
	ops, _ := rowops.Of(locker)
	meters, err := metrics.New(ops.MeterProvider(), "rowlock")
	if err != nil {
		return nil, fmt.Errorf("reaper: metrics: %w", err)
	}
	return &Reaper{locker: locker, ops: ops, cfg: cfg, schedule: schedule, logger: ops.Logger(), metrics: meters}, nil
}

// RunOnce sweeps now: it deletes lock rows whose lease lapsed more than the
// grace ago, then the limits of idle semaphores, then dead waiters, in batches of one short transaction each,
// until a batch comes back short. A live lock is never deleted, nor a
// lingering one (released early under MinHold): both have leases in the
// future by the database clock. The sweep keeps the tokens of deleted rows
// (in the token counters, in the same transaction), so they never go
// backwards.
//
// Only one reaper sweeps a database at a time: RunOnce first takes the
// reaper lock (WithLockName) without waiting, and when another reaper holds
// it returns Result{Skipped: true} and no error.
//
// When ctx ends, the batch in flight is canceled and RunOnce returns ctx's
// error; when the reaper lock is lost, it
// stops after the batch in flight with an error wrapping
// dblock.ErrLockLost. Either way the Result counts what was deleted.
// Errors: dblock.ErrSchemaMissing when the tables do not exist, or a driver
// error.
func (r *Reaper) RunOnce(ctx context.Context) (Result, error) {
	return r.sweep(ctx, nil)
}

// Start runs the reaper on its schedule (WithSchedule) in a goroutine of
// its own until Stop; a sweep still running when the next is due is
// skipped. Calling Start again before Stop does nothing.
func (r *Reaper) Start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cron != nil {
		return
	}
	stop := make(chan struct{})
	logger := cronLogger{r.logger}
	c := cron.New(
		cron.WithLogger(logger),
		cron.WithChain(cron.Recover(logger), cron.SkipIfStillRunning(logger)),
	)
	c.Schedule(r.schedule, cron.FuncJob(func() { r.scheduled(stop) }))
	c.Start()
	r.cron, r.stop = c, stop
	r.logger.Debug("reaper: started", "schedule", r.cfg.schedule)
}

// Stop ends the schedule. The sweep in flight, if any, stops after its
// current batch (each batch is committed on its own, so nothing is left
// half done); the returned context is done once it has. Stop without Start
// returns a context that is done already.
func (r *Reaper) Stop() context.Context {
	r.mu.Lock()
	c, stop := r.cron, r.stop
	r.cron, r.stop = nil, nil
	r.mu.Unlock()
	if c == nil {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	close(stop)
	r.logger.Debug("reaper: stopping")
	return c.Stop()
}

// scheduled is one run of the cron job.
func (r *Reaper) scheduled(stop <-chan struct{}) {
	// Statements are not canceled by Stop: the batch in flight commits,
	// then the loop sees stop.
	_, _ = r.sweep(context.Background(), stop)
}

// sweep runs and logs one sweep.
func (r *Reaper) sweep(ctx context.Context, stop <-chan struct{}) (Result, error) {
	started := time.Now()
	res, stopped, err := r.run(ctx, stop)
	args := []any{"locks", res.Locks, "semaphores", res.Semaphores, "waiters", res.Waiters, "duration", time.Since(started)}
	outcome := "swept"
	switch {
	case err != nil:
		outcome = "failed"
	case res.Skipped:
		outcome = "skipped"
	}
	r.metrics.Sweep(context.WithoutCancel(ctx), outcome, res.Locks, res.Waiters)
	switch {
	case err != nil:
		r.logger.Error("reaper: sweep failed", append(args, "error", err)...)
	case res.Skipped:
		r.logger.Debug("reaper: skipped; another reaper is sweeping", "lock", r.cfg.lockName)
	case stopped:
		r.logger.Info("reaper: sweep stopped early", args...)
	case res.Locks > 0 || res.Semaphores > 0 || res.Waiters > 0:
		r.logger.Info("reaper: swept", args...)
	default:
		r.logger.Debug("reaper: swept", args...)
	}
	return res, err
}

// run sweeps batch after batch under the reaper lock. stopped is true when
// it returned early because stop was closed.
func (r *Reaper) run(ctx context.Context, stop <-chan struct{}) (res Result, stopped bool, err error) {
	if err := ctx.Err(); err != nil {
		// TryAcquire would report it as "not acquired", a skip.
		return res, false, fmt.Errorf("reaper: %w", err)
	}
	// A fresh owner, so a ctx carrying an owner that holds the reaper lock
	// cannot re-enter it and sweep beside another run.
	guard, err := r.locker.TryAcquire(dblock.WithOwner(ctx, lockinput.NewOwner().ID), r.cfg.lockName,
		dblock.Note("sqllock reaper"))
	if errors.Is(err, dblock.ErrNotAcquired) {
		return Result{Skipped: true}, false, nil
	}
	if err != nil {
		return res, false, fmt.Errorf("reaper: take the reaper lock %q: %w", r.cfg.lockName, err)
	}
	defer func() {
		relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if relErr := guard.Release(relCtx); relErr != nil && !errors.Is(relErr, dblock.ErrLockLost) {
			r.logger.Warn("reaper: release the reaper lock", "lock", r.cfg.lockName, "error", relErr)
		}
	}()
	if r.sweeping != nil {
		r.sweeping(true)
		defer r.sweeping(false)
	}
	return r.sweepHeld(ctx, guard, stop)
}

// sweepHeld deletes, batch after batch, while guard (the reaper lock) is
// held; it stops early when stop is closed, guard is lost or ctx ends.
func (r *Reaper) sweepHeld(ctx context.Context, guard dblock.Lock, stop <-chan struct{}) (res Result, stopped bool, err error) {
	// Lock rows, then semaphores' limits, are swept in one pass over their
	// table, from name to name; dead waiters are deleted until a batch
	// comes back short.
	after, afterSemaphore := "", ""
	phases := []struct {
		deleted *int
		batch   func() (n int, done bool, err error)
	}{
		{&res.Locks, func() (int, bool, error) {
			n, next, err := r.ops.Sweep(ctx, r.cfg.grace, r.cfg.batchSize, after)
			after = next
			return n, next == "", err
		}},
		{&res.Semaphores, func() (int, bool, error) {
			n, next, err := r.ops.SweepSemaphores(ctx, r.cfg.grace, r.cfg.batchSize, afterSemaphore)
			afterSemaphore = next
			return n, next == "", err
		}},
		{&res.Waiters, func() (int, bool, error) {
			n, err := r.ops.Queue().DeleteDead(ctx, r.cfg.grace, r.cfg.batchSize)
			return n, n < r.cfg.batchSize, err
		}},
	}
	for _, p := range phases {
		for {
			select {
			case <-stop:
				return res, true, nil
			case <-guard.Done():
				return res, false, fmt.Errorf("reaper: sweep interrupted: %w", guard.Err())
			default:
			}
			if err := ctx.Err(); err != nil {
				return res, false, fmt.Errorf("reaper: sweep interrupted: %w", err)
			}
			n, done, err := p.batch()
			*p.deleted += n
			if err != nil {
				return res, false, err
			}
			if done {
				break
			}
		}
	}
	return res, false, nil
}

// releaseTimeout bounds releasing the reaper lock after ctx has ended.
const releaseTimeout = 10 * time.Second

// cronLogger routes robfig/cron's logs to slog: its chatty Info (every
// wake-up) at Debug, its errors (a recovered panic) at Error.
type cronLogger struct{ l *slog.Logger }

func (c cronLogger) Info(msg string, keysAndValues ...any) {
	c.l.Debug("reaper: cron: "+msg, keysAndValues...)
}

func (c cronLogger) Error(err error, msg string, keysAndValues ...any) {
	c.l.Error("reaper: cron: "+msg, append([]any{"error", err}, keysAndValues...)...)
}
