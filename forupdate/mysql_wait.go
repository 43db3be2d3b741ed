package forupdate

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"time"

	"github.com/sqllock/sqllock/internal/clock"
)

// lockWaiting waits for the row lock, at most one bounded slice (see the
// type's doc).
func (m *mysql) lockWaiting(ctx context.Context, c lockCall, lockWait, draw string) (token int64, found, interrupted bool, err error) {
	if ctx.Err() != nil {
		return 0, false, true, nil
	}
	seconds := lockWaitSeconds(ctx, c.bound)
	sctx, cancel := shortContext(ctx)
	// An integer computed here, not user input.
	_, err = c.tx.ExecContext(sctx, myBoundLockWait+strconv.FormatInt(seconds, 10))
	cancel()
	if err != nil {
		return 0, false, false, err
	}
	query, marker := marked(lockWait)
	// The statement ends by itself within its bound: grace lets it, when
	// KILL QUERY cannot be sent, rather than cut the connection.
	grace := time.Duration(seconds)*time.Second + interruptGrace
	interrupted, err = runInterruptible(ctx, m.killer(marker), grace, func(ctx context.Context) error {
		err := c.tx.QueryRowContext(ctx, query, c.name).Scan(&token)
		if errors.Is(err, sql.ErrNoRows) {
			found = false
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil || interrupted || !found {
		return 0, false, interrupted, err
	}
	if draw != "" {
		if token, err = m.drawFor(ctx, c, draw); err != nil {
			return 0, false, false, err
		}
	}
	// The lock is held: give the user's statements in Tx the session's own
	// lock wait timeout back.
	sctx, cancel = shortContext(ctx)
	_, err = c.tx.ExecContext(sctx, myRestoreLockWait)
	cancel()
	if err != nil {
		return 0, false, false, err
	}
	return token, true, false, nil
}

// maxWaitTimeout is the largest wait_timeout MySQL accepts (one year).
const maxWaitTimeout = 31536000

// myLockWaitSlice bounds one waiting statement: how long it may outlive
// its Acquire when KILL QUERY cannot be sent, and how often an idle waiter
// begins its wait again (four short statements).
const myLockWaitSlice = 2 * time.Second

// lockWaitSeconds is the innodb_lock_wait_timeout of one waiting
// statement: myLockWaitSlice, or less when ctx's deadline is nearer, in
// whole seconds (the variable's unit) and at least one (MySQL's minimum).
// A positive bound shortens the slice too.
func lockWaitSeconds(ctx context.Context, bound time.Duration) int64 {
	wait := myLockWaitSlice
	if bound > 0 {
		wait = min(wait, bound)
	}
	if deadline, ok := ctx.Deadline(); ok {
		wait = min(wait, deadline.Sub(clock.Now()))
	}
	return max(int64((wait+time.Second-1)/time.Second), 1)
}

// shortContext is for a statement that returns at once and must not be
// cut short by ctx: the driver answers a canceled context by closing the
// connection. It keeps ctx's values and is bounded by cleanupTimeout.
func shortContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}
