package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/queue"
	"github.com/sqllock/sqllock/internal/rowops"
)

// The operator functions (listing, revoking, sweeping) are not on the
// Locker: package admin and package reaper reach them through
// internal/rowops.
func init() {
	// Code built on a Locker (cronguard, gocronlock, leader) logs where
	// the Locker does.
	lockkit.Declare((*Locker)(nil), lockkit.Capabilities{
		Logger: func(l dblock.Locker) *slog.Logger { return l.(*Locker).cfg.logger },
	})
	rowops.Declare(func(locker any) (rowops.Ops, bool) {
		l, ok := locker.(*Locker)
		if !ok || l == nil {
			return nil, false
		}
		return ops{l}, true
	})
}

// ops is a Locker's rowops.Ops.
type ops struct{ l *Locker }

var _ rowops.Ops = ops{}

func (o ops) Queue() *queue.Queue                 { return o.l.queue }
func (o ops) Logger() *slog.Logger                { return o.l.cfg.logger }
func (o ops) MeterProvider() metric.MeterProvider { return o.l.cfg.meters }

func (o ops) Revoke(ctx context.Context, name string) (bool, error) { return o.l.revoke(ctx, name) }

func (o ops) Sweep(ctx context.Context, grace time.Duration, limit int, after string) (int, string, error) {
	return o.l.sweep(ctx, grace, limit, after)
}

func (o ops) SweepSemaphores(ctx context.Context, grace time.Duration, limit int, after string) (int, string, error) {
	return o.l.sweepSemaphores(ctx, grace, limit, after)
}

// Locks lists the locks taken now, by the database clock, in name order:
// at most limit (at least 1) of them. It reads the whole lock table when
// few of its rows are held: it is for people and tools that look (sqllock
// status), not for a hot path.
func (o ops) Locks(ctx context.Context, limit int) ([]rowops.HeldLock, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return nil, fmt.Errorf("admin: Locks: %w", err)
	}
	if limit < 1 {
		return nil, fmt.Errorf("admin: Locks: %w", &dblock.OptionError{Option: "limit", Reason: "must be at least 1"})
	}
	locks, err := o.l.store.locks(ctx, limit)
	if err != nil {
		return nil, lockkit.WrapDBError("admin: Locks", err)
	}
	return locks, nil
}

// Held returns name's lock and true if it is taken now, by the database
// clock; false when it is free.
func (o ops) Held(ctx context.Context, name string) (rowops.HeldLock, bool, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return rowops.HeldLock{}, false, fmt.Errorf("admin: Held: %w", err)
	}
	if err := lockinput.ValidateCallerName(name); err != nil {
		return rowops.HeldLock{}, false, err
	}
	return o.l.held(ctx, name)
}

// held returns name's lock if it is taken now.
func (l *Locker) held(ctx context.Context, name string) (rowops.HeldLock, bool, error) {
	h, ok, err := l.store.held(ctx, name)
	if err != nil {
		return rowops.HeldLock{}, false, lockkit.WrapDBError("rowlock: held", err)
	}
	return h, ok, nil
}

// SemaphoreLimit reads the limit recorded for semaphore name (see
// Locker.Semaphore): 0 when none is.
func (o ops) SemaphoreLimit(ctx context.Context, name string) (int, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return 0, fmt.Errorf("admin: %w", err)
	}
	var limit int
	err := o.l.runner().QueryRowContext(ctx, o.l.kinds().limitSQL().read, name).Scan(&limit)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, lockkit.WrapDBError("admin: semaphore limit", err)
	}
	return limit, nil
}

// LapsedLocks counts, by the database clock, the lock rows whose lease has
// lapsed (released locks keep their rows).
func (o ops) LapsedLocks(ctx context.Context) (int, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return 0, fmt.Errorf("admin: Lapsed: %w", err)
	}
	n, err := o.l.store.countLapsed(ctx)
	if err != nil {
		return 0, lockkit.WrapDBError("admin: Lapsed", err)
	}
	return n, nil
}
