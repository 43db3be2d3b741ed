package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// Waiters returns name's live waiters in queue order, the head first.
// Errors: dblock.ErrInvalidName, dblock.ErrSchemaMissing, or a driver error.
func (q *Queue) Waiters(ctx context.Context, name string) ([]Waiter, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	if err := lockinput.ValidateName(name); err != nil {
		return nil, err
	}
	ws, err := q.store.list(ctx, name)
	if err != nil {
		return nil, lockkit.WrapDBError("queue: list", err)
	}
	return ws, nil
}

// AllWaiters returns the live waiters of every name, ordered by name and
// then queue order, at most limit (at least 1) of them. Position counts
// within each name's queue. It is for people and tools that look (sqllock
// status), not for a hot path.
// Errors: dblock.ErrInvalidOption, dblock.ErrSchemaMissing, or a driver
// error.
func (q *Queue) AllWaiters(ctx context.Context, limit int) ([]Waiter, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	if limit < 1 {
		return nil, fmt.Errorf("queue: %w", &dblock.OptionError{Option: "limit", Reason: "must be at least 1"})
	}
	ws, err := q.store.listAll(ctx, limit)
	if err != nil {
		return nil, lockkit.WrapDBError("queue: list", err)
	}
	return ws, nil
}

// CountDead counts the waiters whose heartbeat has lapsed, by the database
// clock: what DeleteDead with no grace would delete.
func (q *Queue) CountDead(ctx context.Context) (int, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return 0, fmt.Errorf("queue: %w", err)
	}
	n, err := q.store.countDead(ctx)
	if err != nil {
		return 0, lockkit.WrapDBError("queue: count dead waiters", err)
	}
	return n, nil
}

// maxDeleteBatch bounds DeleteDead's limit, as the reaper bounds its
// batches: one statement never deletes a great many rows.
const maxDeleteBatch = 10000

// DeleteDead deletes at most limit (1 to 10000) waiters whose heartbeat
// lapsed more than grace ago by the database clock, oldest first, and says
// how many; a batch that comes back short has deleted all there were. A
// dead waiter (its process or connection died) holds up its queue only
// until its heartbeat lapses, but its row stays until deleted: package
// reaper calls this. A waiter heartbeating at that moment is kept.
// Contention is retried a few times.
// Errors: dblock.ErrInvalidOption, dblock.ErrSchemaMissing, or a driver
// error.
func (q *Queue) DeleteDead(ctx context.Context, grace time.Duration, limit int) (int, error) {
	switch err := lockinput.CheckContext(ctx); {
	case err != nil:
		return 0, fmt.Errorf("queue: DeleteDead: %w", err)
	case grace < 0:
		return 0, fmt.Errorf("queue: DeleteDead: %w", &dblock.OptionError{Option: "grace", Reason: "must not be negative"})
	case limit < 1 || limit > maxDeleteBatch:
		return 0, fmt.Errorf("queue: DeleteDead: %w", &dblock.OptionError{Option: "limit", Reason: fmt.Sprintf("must be 1 to %d", maxDeleteBatch)})
	}
	var n int
	err := lockkit.RetryContention(ctx, func() (err error) {
		n, err = q.store.deleteDead(ctx, grace, limit)
		return err
	})
	if err != nil {
		return 0, lockkit.WrapDBError("queue: delete dead waiters", err)
	}
	return n, nil
}

// Position is t's place in its name's queue, 1 for the head, as Waiters
// counts it; 0 once t has left or its place has lapsed. It reads the
// name's queue: for people and tools that look, not for a hot path.
// Errors: as Waiters'.
func (t *Ticket) Position(ctx context.Context) (int, error) {
	ws, err := t.q.Waiters(ctx, t.name)
	if err != nil {
		return 0, err
	}
	id := t.ID()
	for _, w := range ws {
		if w.ID == id {
			return w.Position, nil
		}
	}
	return 0, nil
}
