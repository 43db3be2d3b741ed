package rowlock

import (
	"context"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/rowops"
)

// sweep deletes lock rows whose lease lapsed more than grace ago by the
// database clock, one batch per call: it looks at the next limit rows after
// the name after, in name order ("" starts at the first), deletes those
// that lapsed, and returns how many it deleted and where the next batch
// starts; next is "" once the batch reached the end of the table. A whole
// sweep is the loop
//
//	for after := ""; ; {
//		n, next, err := l.sweep(ctx, grace, limit, after)
//		// ... count n, handle err
//		if next == "" {
//			break
//		}
//		after = next
//	}
//
// which reads each row once: rows are found by walking the primary key, as
// the table has no index on expires_at (it would make every acquire and
// release write it).
//
// Released locks leave their rows behind (they carry the name's fencing
// token); Sweep is how they go. It raises the rows' token counters to their
// tokens in the same transaction, so tokens never go backwards, and skips
// rows an acquirer is taking over at that moment. It never deletes a live
// lock: a live lease has not lapsed. Delete lock rows only with a sweep (the
// reaper package runs it on a schedule): a row deleted by hand takes its
// token's history with it. Contention is retried until ctx ends; the error
// then wraps ctx.Err().
//
// On MySQL the batch that reaches the end of the table also deletes the
// doorbell records of sessions that died (docs/design.md, Waking
// waiters); they are not counted in deleted.
func (l *Locker) sweep(ctx context.Context, grace time.Duration, limit int, after string) (deleted int, next string, err error) {
	switch {
	case ctx == nil:
		return 0, "", fmt.Errorf("rowlock: Sweep: %w", lockinput.CheckContext(ctx))
	case grace < 0:
		return 0, "", fmt.Errorf("rowlock: Sweep: %w", &dblock.OptionError{Option: "grace", Reason: "must not be negative"})
	case limit < 1 || limit > rowops.MaxSweepBatch:
		return 0, "", fmt.Errorf("rowlock: Sweep: %w", &dblock.OptionError{Option: "limit", Reason: fmt.Sprintf("must be 1 to %d", rowops.MaxSweepBatch)})
	case len(after) > dblock.MaxNameLength:
		// No name sorts after it that could be in the table; a typed error
		// rather than a query that finds nothing.
		return 0, "", fmt.Errorf("rowlock: Sweep: %w", &dblock.OptionError{Option: "after", Reason: fmt.Sprintf("longer than %d bytes: not a position a Sweep returned", dblock.MaxNameLength)})
	}
	var b sweepBatch
	err = lockkit.RetryContentionUntilDone(ctx, func() (err error) {
		b, err = l.store.sweep(ctx, grace, limit, after)
		return err
	})
	if err != nil {
		return 0, "", lockkit.WrapDBError("rowlock: sweep", err)
	}
	if b.scanned < limit {
		return b.deleted, "", nil
	}
	return b.deleted, b.last, nil
}
