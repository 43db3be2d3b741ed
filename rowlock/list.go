package rowlock

import (
	"context"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/queue"
)

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

// Waiters lists the live fair waiters of name in queue order: position,
// owner, and how long each has waited by the database clock.
// Errors: dblock.ErrInvalidName, dblock.ErrSchemaMissing, or a driver error.
func (l *Locker) Waiters(ctx context.Context, name string) ([]Waiter, error) {
	if err := lockkit.CheckContext(ctx); err != nil {
		return nil, fmt.Errorf("rowlock: Waiters: %w", err)
	}
	ws, err := l.queue.List(ctx, name)
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
