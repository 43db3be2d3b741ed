package cronguard

import (
	"context"
	"errors"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/tickguard"
)

// guardedJob is a job added through a Guard: what the Cron runs.
type guardedJob struct {
	g        *Guard
	name     string // the job's name, as given
	lockName string // its lock's name: name, shortened if too long
	job      cron.Job
	state    *jobState
}

// jobState is set once, when the job is added: AddJob learns the schedule
// from the Cron after adding the job, so a run that starts at once waits
// for it.
type jobState struct {
	ready    chan struct{} // closed once schedule is set
	schedule cron.Schedule // nil if the entry was gone before it was read
}

// Run is called by the scheduler at each activation.
func (j guardedJob) Run() {
	g := j.g
	base := g.ctx
	if base.Err() != nil {
		return
	}
	// The Cron's own clock: the activations it fires are computed from it.
	fired := time.Now().In(g.c.Location())
	<-j.state.ready
	if j.state.schedule == nil {
		return // removed while it was being added
	}
	tick, windowEnd, ok := tickguard.Attribute(j.state.schedule.Next, fired)
	if ok {
		base = context.WithValue(base, tickKey{}, tick)
	} else {
		// Cron fires only at activations, so only a schedule that
		// misreports them gets here; run unheld rather than never.
		g.logger.Warn("cronguard: no activation of the job's schedule near this run; its lock is not held after it",
			"name", j.lockName, "fired", fired)
		windowEnd = fired
	}
	lock, err := g.tg.Acquire(base, j.lockName, g.tg.Hold(fired, windowEnd))
	switch {
	case errors.Is(err, dblock.ErrNotAcquired):
		g.logger.Debug("cronguard: run skipped: lock held elsewhere", "name", j.lockName, "tick", tick)
		return
	case err != nil:
		g.logger.Error("cronguard: run skipped: cannot take the lock", "name", j.lockName, "tick", tick, "error", err)
		return
	}
	// Released even if the job panics (cron.Recover may be outside us).
	defer g.release(base, lock)

	ctx, cancel := context.WithCancel(lock.Context())
	defer cancel()
	stop := context.AfterFunc(base, cancel)
	defer stop()
	if cj, ok := j.job.(contextJob); ok {
		cj.job.Run(ctx)
	} else {
		j.job.Run()
	}
}

func (g *Guard) release(base context.Context, lock dblock.Lock) {
	err := g.tg.Release(base, lock)
	switch {
	case err == nil:
	case errors.Is(err, dblock.ErrLockLost):
		g.logger.Warn("cronguard: job lost its lock while running", "name", lock.Name(), "error", err)
	default:
		g.logger.Error("cronguard: releasing the lock", "name", lock.Name(), "error", err)
	}
}
