package cronguard

import (
	"context"
	"log/slog"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/tickguard"
)

// Option configures a Guard.
type Option func(*config)

type config struct {
	tick   tickguard.Config
	ctx    context.Context
	logger *slog.Logger
}

// WithLogger sets where the guard logs. Default: where its Locker logs
// (rowlock.WithLogger, forupdate.WithLogger); for a Locker of another
// kind, slog.Default() at Warn and above.
func WithLogger(logger *slog.Logger) Option { return func(c *config) { c.logger = logger } }

// WithLockOptions sets the options of every acquisition of a job's lock,
// the dblock options:
//   - dblock.TTL, the lease, renewed while the job runs; default
//     dblock.DefaultTTL. It bounds how long a crashed replica blocks the
//     job.
//   - dblock.MinHold, how long the lock stays taken at least after a run
//     started, even when the run finished sooner. Default: until halfway
//     to the job's next activation, so that replicas firing the same
//     activation up to half a gap late or early skip it and those firing
//     the next one run it. A fixed d suits schedules with even gaps only:
//     it must outlast the spread between replicas and end before the next
//     activation fires. dblock.MinHold(0) releases at the end of the run:
//     the replicas' runs are then serialized, not deduplicated.
//   - dblock.Note and dblock.Fair, passed on as given.
//
// The options are checked, and the Locker asked whether it accepts them,
// by New.
func WithLockOptions(opts ...dblock.Option) Option {
	return func(c *config) { c.tick.Lock = append(c.tick.Lock, opts...) }
}

// WithWait makes a replica wait up to d for the lock instead of skipping the
// run when another holds it; default 0 (skip at once). Waiting serializes
// the replicas' runs rather than deduplicating them: every replica that gets
// the lock within d runs the job, one after the other (use it with
// dblock.MinHold(0), or each waits out the hold too).
func WithWait(d time.Duration) Option { return func(c *config) { c.tick.Wait = d } }

// WithContext sets the context that acquisitions and jobs derive from: its
// values reach the jobs, and its end cancels them (for example on shutdown,
// with cron.Stop). Default context.Background().
func WithContext(ctx context.Context) Option { return func(c *config) { c.ctx = ctx } }
