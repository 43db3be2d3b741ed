// Package rowops carries the operator functions of a rowlock Locker
// (listing and revoking holds, sweeping lapsed rows) to the packages that
// serve them, admin and reaper, so that they are not on the user's
// Locker. rowlock declares them once, when it is initialised (Declare);
// nothing changes them afterwards.
package rowops

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/sqllock/sqllock/internal/queue"
)

// MaxSweepBatch bounds one sweep batch, so one transaction never holds
// many row locks (and a MySQL statement's placeholders stay few).
const MaxSweepBatch = 10000

// HeldLock is a row of the lock table taken now, by the database clock.
// admin.HeldLock has the same fields.
type HeldLock struct {
	Name      string
	Token     int64
	OwnerHost string
	OwnerID   string
	HoldCount int
	Note      string
	HeldFor   time.Duration
	ExpiresIn time.Duration
}

// Ops is what a rowlock Locker does for operators. The methods validate
// their input and wrap errors as the public ones they serve document.
type Ops interface {
	// Locks lists the rows taken now, in name order, at most limit.
	Locks(ctx context.Context, limit int) ([]HeldLock, error)
	// Held returns the row name if it is taken now.
	Held(ctx context.Context, name string) (HeldLock, bool, error)
	// SemaphoreLimit is the limit recorded for semaphore name, 0 when
	// none is.
	SemaphoreLimit(ctx context.Context, name string) (int, error)
	// LapsedLocks counts the rows whose lease has lapsed.
	LapsedLocks(ctx context.Context) (int, error)
	// Revoke ends the lease of the row name now.
	Revoke(ctx context.Context, name string) (bool, error)
	// Sweep deletes one batch of rows lapsed more than grace ago.
	Sweep(ctx context.Context, grace time.Duration, limit int, after string) (deleted int, next string, err error)
	// SweepSemaphores deletes one batch of unused semaphore limits.
	SweepSemaphores(ctx context.Context, grace time.Duration, limit int, after string) (deleted int, next string, err error)
	// Queue is the Locker's waiter table.
	Queue() *queue.Queue
	// Logger and MeterProvider are the Locker's.
	Logger() *slog.Logger
	MeterProvider() metric.MeterProvider
}

// of returns the Ops of a *rowlock.Locker; rowlock sets it in its init.
var of func(locker any) (Ops, bool)

// Declare is called once, by rowlock's init, with the function that
// returns a Locker's Ops.
func Declare(f func(locker any) (Ops, bool)) { of = f }

// Of returns the Ops of locker, a *rowlock.Locker; false for anything
// else.
func Of(locker any) (Ops, bool) {
	if of == nil {
		return nil, false
	}
	return of(locker)
}
