package forupdate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// maxRowCreations bounds how often one acquisition creates its row: more
// than once means something keeps deleting it.
const maxRowCreations = 3

// maxDrawRetries bounds how often one acquisition starts over after
// contention while drawing its token; then it counts as contention on the
// lock (TryAcquire: not acquired; Acquire: waits and tries again).
const maxDrawRetries = 8

// rowLocking is one acquisition's attempts at locking its row, each in a
// transaction of its own, on the connection it took for them.
type rowLocking struct {
	l   *Locker
	key holdKey
	req request
	// call is the attempt: its tx is the current one's, and contended is
	// set once an attempt found the row locked or met contention.
	call lockCall
	// clean is false when the connection's state is uncertain and it must
	// not return to the pool.
	clean   bool
	created int // rows created
	draws   int // attempts started over after contention drawing the token
}

// lock makes attempts until the row is locked, the context ends, or
// (TryAcquire) someone else holds it.
func (r *rowLocking) lock(ctx context.Context) (*hold, error) {
	for {
		h, again, err := r.attempt(ctx)
		if !again {
			return h, err
		}
	}
}

// attempt begins a transaction and locks the row in it. If that fails it
// rolls the transaction back, and again tells whether to attempt again.
func (r *rowLocking) attempt(ctx context.Context) (h *hold, again bool, err error) {
	// The transaction outlives Acquire's context: it is the lock.
	txCtx, txCancel := context.WithCancel(context.WithoutCancel(ctx))
	tx, err := r.call.conn.BeginTx(txCtx, r.l.d.txOptions())
	if err != nil {
		txCancel()
		r.clean = false
		return nil, false, r.l.acquireError(ctx, r.key.name, err)
	}
	r.call.tx = tx
	token, found, interrupted, err := r.l.d.lock(ctx, r.call)
	if err == nil && found && !interrupted {
		r.clean = true
		return newHold(r.l, r.key, r.req, -1, r.call, token, txCancel), false, nil
	}
	// After an interrupt the statement has returned and the server has
	// been told to stop it; a rollback that succeeds after that proves
	// the session usable. If the interrupt failed, the driver cut the
	// connection and the rollback fails.
	rbErr := tx.Rollback()
	txCancel()
	r.clean = rbErr == nil || errors.Is(rbErr, sql.ErrTxDone)
	switch {
	case interrupted || ctx.Err() != nil:
		return nil, false, errors.Join(dblock.ErrNotAcquired, ctx.Err())
	case err != nil:
		again, err = r.failed(ctx, err, rbErr)
		return nil, again, err
	case !r.clean:
		return nil, false, r.l.acquireError(ctx, r.key.name, rbErr)
	}
	// The row is missing.
	again, err = r.createRow(ctx)
	return nil, again, err
}

// failed tells what follows an attempt whose statement failed with err
// and whose rollback returned rbErr.
func (r *rowLocking) failed(ctx context.Context, err, rbErr error) (again bool, _ error) {
	if pe := (*pausedError)(nil); errors.As(err, &pe) && r.clean {
		// The failover pause: nobody may hold the lock yet.
		return waitPause(ctx, r.call.wait, pe.left)
	}
	if errors.Is(err, errDrawContention) && r.clean && r.draws < maxDrawRetries {
		// The row lock was won: the lock is free, start over.
		r.draws++
		return true, nil
	}
	switch lockkit.ClassifyError(err) {
	case lockkit.ClassLockUnavailable, lockkit.ClassContention:
		// NOWAIT's answer, a deadlock, or a lock wait timeout (the
		// server's, or the bound of a MySQL waiting statement): taken, or
		// try again, waiting.
		if !r.call.wait {
			return false, dblock.ErrNotAcquired
		}
		if r.clean {
			r.call.contended = true
			return true, nil
		}
		// The connection failed too (the rollback did): that is what to
		// report, not contention, which never reaches users.
		return false, r.l.acquireError(ctx, r.key.name, rbErr)
	}
	return false, r.l.acquireError(ctx, r.key.name, err)
}

// createRow creates the missing row, after which the row is attempted
// again.
func (r *rowLocking) createRow(ctx context.Context) (again bool, _ error) {
	if r.created == maxRowCreations {
		return false, fmt.Errorf("forupdate: acquire %q: its row keeps disappearing (rows of %s must never be deleted)", r.key.name, r.l.cfg.table)
	}
	r.created++
	err := r.l.d.create(ctx, r.call.conn, r.key.name)
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() != nil:
		r.clean = false
		return false, errors.Join(dblock.ErrNotAcquired, ctx.Err())
	case lockkit.ClassifyError(err) == lockkit.ClassContention:
		return true, nil
	}
	r.clean = false
	return false, r.l.acquireError(ctx, r.key.name, err)
}
