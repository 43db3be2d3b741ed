package cronguard

import (
	"context"
	"time"

	"github.com/robfig/cron/v3"
)

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

// Job adapts j to a cron.Job. Given to Guard.AddJob or Guard.Schedule as it
// is, j runs with the lock's context; wrapped in another cron.Job first, or
// run any other way, it gets context.Background(). Wrappers such as
// cron.Recover belong in the Cron's chain (cron.WithChain), which wraps the
// guard.
func Job(j ContextJob) cron.Job { return contextJob{j} }

type contextJob struct{ job ContextJob }

func (c contextJob) Run() { c.job.Run(context.Background()) }

type tickKey struct{}

// Tick returns the activation a guard attributed the current run to: the
// activation of the job's schedule nearest to when this replica fired, in
// the Cron's location. Jobs use it as an idempotency key or as "the period
// ending at". ok is false outside a guarded run.
func Tick(ctx context.Context) (tick time.Time, ok bool) {
	tick, ok = ctx.Value(tickKey{}).(time.Time)
	return tick, ok
}
