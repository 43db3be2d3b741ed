package rowlock

import (
	"context"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

// MaxSweepBatch bounds one Sweep, so one transaction never holds many row
// locks (and the MySQL statement's placeholders stay few).
const MaxSweepBatch = 10000

// Sweep deletes up to limit lock rows whose lease lapsed more than grace ago
// by the database clock, and returns how many it deleted. Released locks
// leave their rows behind (they carry the name's fencing token); Sweep is how
// they go. It raises the rows' token counters to their tokens in the same
// transaction, so tokens never go backwards, and skips rows an acquirer is
// taking over at that moment. It never deletes a live lock: a live lease has
// not lapsed. Delete lock rows only with Sweep (the reaper package runs it on
// a schedule): a row deleted by hand takes its token's history with it.
// Contention is retried until ctx ends; the error then wraps ctx.Err().
func (l *Locker) Sweep(ctx context.Context, grace time.Duration, limit int) (int, error) {
	switch {
	case ctx == nil:
		return 0, fmt.Errorf("rowlock: Sweep: %w", dblock.CheckContext(ctx))
	case grace < 0:
		return 0, fmt.Errorf("rowlock: Sweep: %w", &dblock.OptionError{Option: "grace", Reason: "must not be negative"})
	case limit < 1 || limit > MaxSweepBatch:
		return 0, fmt.Errorf("rowlock: Sweep: %w", &dblock.OptionError{Option: "limit", Reason: fmt.Sprintf("must be 1 to %d", MaxSweepBatch)})
	}
	var n int
	err := retryContention(ctx, func() (err error) {
		n, err = l.store.sweep(ctx, grace, limit)
		return err
	})
	if err != nil {
		return 0, dblock.WrapDBError("rowlock: sweep", err)
	}
	return n, nil
}
