package rowlock

import (
	"context"
	"time"

	"github.com/sqllock/sqllock/internal/queue"
	"github.com/sqllock/sqllock/internal/rowops"
)

// The operator functions are not on the Locker (packages admin, reaper and
// queue serve them); these forward to the code they run, so that the
// package's tests keep calling them on the Locker they test.

type (
	HeldLock = rowops.HeldLock
	Waiter   = queue.Waiter
)

const MaxSweepBatch = rowops.MaxSweepBatch

func (l *Locker) Locks(ctx context.Context, limit int) ([]HeldLock, error) {
	return ops{l}.Locks(ctx, limit)
}

func (l *Locker) Held(ctx context.Context, name string) (HeldLock, bool, error) {
	return ops{l}.Held(ctx, name)
}

func (l *Locker) Lapsed(ctx context.Context) (locks, waiters int, err error) {
	if locks, err = (ops{l}).LapsedLocks(ctx); err != nil {
		return 0, 0, err
	}
	waiters, err = l.queue.CountDead(ctx)
	return locks, waiters, err
}

func (l *Locker) Waiters(ctx context.Context, name string) ([]Waiter, error) {
	return l.queue.Waiters(ctx, name)
}

func (l *Locker) AllWaiters(ctx context.Context, limit int) ([]Waiter, error) {
	return l.queue.AllWaiters(ctx, limit)
}

func (l *Locker) DeleteDeadWaiters(ctx context.Context, grace time.Duration, limit int) (int, error) {
	return l.queue.DeleteDead(ctx, grace, limit)
}

func (l *Locker) Sweep(ctx context.Context, grace time.Duration, limit int, after string) (int, string, error) {
	return l.sweep(ctx, grace, limit, after)
}

func (l *Locker) SweepSemaphores(ctx context.Context, grace time.Duration, limit int, after string) (int, string, error) {
	return l.sweepSemaphores(ctx, grace, limit, after)
}

func (l *Locker) Revoke(ctx context.Context, name string) (bool, error) { return l.revoke(ctx, name) }
