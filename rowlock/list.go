package rowlock

import (
	"context"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/queue"
)

// HeldLock is a lock taken now, by the database clock, as its row says.
type HeldLock struct {
	Name      string
	Token     int64
	OwnerHost string
	OwnerID   string
	// HoldCount is the number of holds of a reentrant owner; 0 for a lock
	// released early that stays taken until its MinHold has passed.
	HoldCount int
	Note      string
	// HeldFor is how long ago the lock was acquired.
	HeldFor time.Duration
	// ExpiresIn is how long its lease lasts unless renewed.
	ExpiresIn time.Duration
}

// Waiter is a fair waiter queued for a lock.
type Waiter struct {
	// Position is the waiter's place in its name's queue; 1 is the head.
	Position int
	// ID is the waiter's row id; ids order the queue.
	ID        int64
	Name      string
	OwnerHost string
	OwnerID   string
	// Waited is how long ago it joined the queue, by the database clock.
	Waited time.Duration
	// ExpiresIn is how long its place is kept without a heartbeat.
	ExpiresIn time.Duration
}

// Locks lists the locks taken now, by the database clock, in name order:
// at most limit (at least 1) of them. It reads the whole lock table when
// few of its rows are held: it is for people and tools that look (sqllock
// status), not for a hot path.
// Errors: dblock.ErrInvalidOption, dblock.ErrSchemaMissing, or a driver error.
func (l *Locker) Locks(ctx context.Context, limit int) ([]HeldLock, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return nil, fmt.Errorf("rowlock: Locks: %w", err)
	}
	if limit < 1 {
		return nil, fmt.Errorf("rowlock: Locks: %w", &dblock.OptionError{Option: "limit", Reason: "must be at least 1"})
	}
	locks, err := l.store.locks(ctx, limit)
	if err != nil {
		return nil, lockkit.WrapDBError("rowlock: Locks", err)
	}
	return locks, nil
}

// Held returns name's lock and true if it is taken now, by the database
// clock; false when it is free.
// Errors: dblock.ErrInvalidName, dblock.ErrSchemaMissing, or a driver error.
func (l *Locker) Held(ctx context.Context, name string) (HeldLock, bool, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return HeldLock{}, false, fmt.Errorf("rowlock: Held: %w", err)
	}
	if err := lockinput.ValidateCallerName(name); err != nil {
		return HeldLock{}, false, err
	}
	h, ok, err := l.store.held(ctx, name)
	if err != nil {
		return HeldLock{}, false, lockkit.WrapDBError("rowlock: Held", err)
	}
	return h, ok, nil
}

// Waiters lists the live fair waiters of name in queue order: position,
// owner, and how long each has waited by the database clock.
// Errors: dblock.ErrInvalidName, dblock.ErrSchemaMissing, or a driver error.
func (l *Locker) Waiters(ctx context.Context, name string) ([]Waiter, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return nil, fmt.Errorf("rowlock: Waiters: %w", err)
	}
	if err := lockinput.ValidateCallerName(name); err != nil {
		return nil, err
	}
	ws, err := l.queue.List(ctx, name)
	return waitersOf(ws), err
}

// AllWaiters lists the live fair waiters of every name, by name and then
// in queue order: at most limit (at least 1) of them. Position counts
// within each name's queue.
// Errors: dblock.ErrInvalidOption, dblock.ErrSchemaMissing, or a driver error.
func (l *Locker) AllWaiters(ctx context.Context, limit int) ([]Waiter, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return nil, fmt.Errorf("rowlock: AllWaiters: %w", err)
	}
	ws, err := l.queue.ListAll(ctx, limit)
	return waitersOf(ws), err
}

func waitersOf(ws []queue.Waiter) []Waiter {
	if ws == nil {
		return nil
	}
	out := make([]Waiter, len(ws))
	for i, w := range ws {
		out[i] = Waiter(w)
	}
	return out
}

// Lapsed counts, by the database clock, the lock rows whose lease has
// lapsed (released locks keep their rows) and the fair waiters whose
// heartbeat has: what Sweep and DeleteDeadWaiters with no grace would
// delete now.
// Errors: dblock.ErrSchemaMissing, or a driver error.
func (l *Locker) Lapsed(ctx context.Context) (locks, waiters int, err error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return 0, 0, fmt.Errorf("rowlock: Lapsed: %w", err)
	}
	if locks, err = l.store.countLapsed(ctx); err != nil {
		return 0, 0, lockkit.WrapDBError("rowlock: Lapsed", err)
	}
	if waiters, err = l.queue.CountDead(ctx); err != nil {
		return 0, 0, err
	}
	return locks, waiters, nil
}

// DeleteDeadWaiters deletes at most limit fair waiters whose heartbeat
// lapsed more than grace ago by the database clock, oldest first, and says
// how many; a batch that comes back short has deleted all there were. A
// dead waiter (its process or connection died) holds up its queue only
// until its heartbeat lapses, but its row stays until deleted: package
// reaper calls this. A waiter heartbeating at that moment is kept. limit
// is 1 to MaxSweepBatch.
// Errors: dblock.ErrInvalidOption, dblock.ErrSchemaMissing, or a driver error.
func (l *Locker) DeleteDeadWaiters(ctx context.Context, grace time.Duration, limit int) (int, error) {
	switch {
	case ctx == nil:
		return 0, fmt.Errorf("rowlock: DeleteDeadWaiters: %w", lockinput.CheckContext(ctx))
	case grace < 0:
		return 0, fmt.Errorf("rowlock: DeleteDeadWaiters: %w", &dblock.OptionError{Option: "grace", Reason: "must not be negative"})
	case limit < 1 || limit > MaxSweepBatch:
		return 0, fmt.Errorf("rowlock: DeleteDeadWaiters: %w", &dblock.OptionError{Option: "limit", Reason: fmt.Sprintf("must be 1 to %d", MaxSweepBatch)})
	}
	return l.queue.DeleteDead(ctx, grace, limit)
}
