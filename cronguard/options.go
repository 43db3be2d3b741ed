package cronguard

import (
	"context"
	"time"

	"github.com/sqllock/sqllock/internal/tickguard"
)

// Option configures a Guard.
type Option func(*config)

type config struct {
	tick tickguard.Config
	ctx  context.Context
}

// WithMinHold sets how long a job's lock stays taken at least after a run
// started, even when the run finished sooner. Default: until halfway to
// the job's next activation, so that replicas firing the same activation
// up to half a gap late or early skip it and those firing the next one run
// it. A fixed d suits schedules with even gaps only: it must outlast the
// spread between replicas and end before the next activation fires.
// WithMinHold(0) releases at the end of the run: the replicas' runs are
// then serialized, not deduplicated.
func WithMinHold(d time.Duration) Option {
	return func(c *config) { c.tick.MinHold, c.tick.MinHoldSet = d, true }
}

// WithTTL sets the lease of the lock, renewed while the job runs; default
// dblock.DefaultTTL. It bounds how long a crashed replica blocks the job.
func WithTTL(d time.Duration) Option { return func(c *config) { c.tick.TTL = d } }

// WithWait makes a replica wait up to d for the lock instead of skipping the
// run when another holds it; default 0 (skip at once). Waiting serializes
// the replicas' runs rather than deduplicating them: every replica that gets
// the lock within d runs the job, one after the other (use it with
// WithMinHold(0), or each waits out the hold too).
func WithWait(d time.Duration) Option { return func(c *config) { c.tick.Wait = d } }

// WithContext sets the context that acquisitions and jobs derive from: its
// values reach the jobs, and its end cancels them (for example on shutdown,
// with cron.Stop). Default context.Background().
func WithContext(ctx context.Context) Option { return func(c *config) { c.ctx = ctx } }
