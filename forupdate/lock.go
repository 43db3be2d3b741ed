package forupdate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/clock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/metrics"
)

// Lock is one hold of a lock taken by a Locker: the row lock of an open
// transaction, on a connection of its own. Reentrant holds of one owner
// share the transaction, the connection and the token. It is safe for
// concurrent use.
type Lock struct {
	h      *hold
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu  sync.Mutex
	err error // nil while held
}

var _ dblock.Lock = (*Lock)(nil)

// Name is the lock's name.
func (k *Lock) Name() string { return k.h.name }

// Token is the fencing token: larger than every earlier holder's token
// for the name, never handed out again (see the package doc). Reentrant
// holds share it.
func (k *Lock) Token() int64 { return k.h.token }

// Owner is who holds the lock.
func (k *Lock) Owner() dblock.Owner { return k.h.key.owner }

// Context carries the owner and is canceled when this hold is released or
// the lock is lost; context.Cause tells which.
func (k *Lock) Context() context.Context { return k.ctx }

// Done is closed when this hold is released or the lock is lost.
func (k *Lock) Done() <-chan struct{} { return k.ctx.Done() }

// Err is nil while held, then dblock.ErrReleased or an error wrapping
// dblock.ErrLockLost.
func (k *Lock) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// Tx is the lock's transaction. Work done in it commits atomically with
// Release: it becomes visible exactly when the next holder can take the
// lock, and a holder that dies or is cut off takes its uncommitted work
// with it. Rules:
//
//   - End it only through Release or Rollback. Committing or rolling it back
//     directly releases the lock at once (PostgreSQL: noticed at the next
//     ping, which loses the lock; MySQL: noticed by Release, which reports
//     the lock lost).
//   - Read each Rows from it to the end, or Close it, before doing
//     anything else: the lock pings the connection between your statements
//     (every TTL/3). On PostgreSQL the ping waits while a Rows is open, and
//     after TTL minus a tenth without a ping the lock is declared lost; on
//     MySQL the driver cannot always tell that a Rows is open, and a ping
//     that runs into a half-read one breaks the connection, losing the
//     lock.
//   - Use it from one goroutine at a time, as any *sql.Tx whose results
//     stream from the server.
//   - On PostgreSQL a failed statement aborts the transaction at once,
//     which releases the lock: the next ping (or Refresh) declares it lost.
//     Run a statement that may fail inside a SAVEPOINT and roll back to
//     it: that aborts the savepoint only, and the lock is kept.
//   - On MySQL a deadlock (error 1213) in it rolls the whole transaction
//     back, which releases the lock too: treat that error as losing the
//     lock.
func (k *Lock) Tx() *sql.Tx { return k.h.tx }

// Refresh checks now that the lock's connection is alive, as the
// background ping does every TTL/3; there is no lease to renew. Errors:
// dblock.ErrNotHeld after Release; an error wrapping dblock.ErrLockLost if
// the lock is lost (Done is closed then too); ctx's error or a driver
// error otherwise. A ping cut short by ctx may cut the connection, and
// with it the lock, which the next background ping then reports.
func (k *Lock) Refresh(ctx context.Context) error {
	if err := lockinput.CheckContext(ctx); err != nil {
		return fmt.Errorf("forupdate: Refresh: %w", err)
	}
	k.mu.Lock()
	err := k.err
	k.mu.Unlock()
	switch {
	case errors.Is(err, dblock.ErrReleased):
		return dblock.ErrNotHeld
	case err != nil:
		return err
	}
	h := k.h
	outcome, err := h.ping(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		return errors.Join(ctx.Err(), err)
	case err != nil:
		h.lose(err)
		return k.Err()
	case outcome == pingTxEnded || outcome == pingTxAborted:
		h.lose(txGone(outcome))
		return k.Err()
	}
	return nil
}

// Release gives up this hold. The last hold of the lock commits the
// transaction, which frees the row for the next holder. ctx bounds the
// commit. If ctx ends before Release is called, the transaction is rolled
// back instead, and Release returns an error wrapping ErrRolledBack. If it
// ends during the commit, the commit is interrupted where the driver
// allows (pgx), and its outcome is unknown.
//
// Errors: dblock.ErrNotHeld on a second Release; an error wrapping
// dblock.ErrLockLost if the lock was lost (the transaction is rolled
// back); ErrRolledBack when the transaction could not be committed; a
// driver error from the commit. The lock is released in every case.
// Release a lost lock too: that returns its connection to the pool.
func (k *Lock) Release(ctx context.Context) error { return k.end(ctx, true) }

// Rollback gives up this hold like Release, but the last hold rolls the
// transaction back, discarding the work done in Tx, and an inner reentrant
// hold marks it rollback-only: the outer Release then rolls back too and
// returns ErrRolledBack. Errors as Release.
func (k *Lock) Rollback(ctx context.Context) error { return k.end(ctx, false) }

func (k *Lock) end(ctx context.Context, commit bool) error {
	// Checked before anything changes: a bad call must leave the lock held.
	if err := lockinput.CheckContext(ctx); err != nil {
		return fmt.Errorf("forupdate: release: %w", err)
	}
	h, l := k.h, k.h.l
	l.mu.Lock()
	h.mu.Lock()
	if _, held := h.handles[k]; !held {
		h.mu.Unlock()
		l.mu.Unlock()
		return dblock.ErrNotHeld
	}
	delete(h.handles, k)
	if !commit {
		h.rollbackOnly = true
	}
	last := len(h.handles) == 0
	lost := h.lost
	if last {
		h.closing = true
		l.forget(h)
	}
	h.mu.Unlock()
	l.mu.Unlock()

	err := lost
	if last {
		err = h.finish(ctx, commit)
	}
	k.mu.Lock()
	if k.err == nil {
		k.err = dblock.ErrReleased
	}
	k.mu.Unlock()
	k.cancel(dblock.ErrReleased)
	return err
}

// lose marks the hold lost with err unless it was released already.
func (k *Lock) lose(err error) {
	k.mu.Lock()
	if k.err != nil {
		k.mu.Unlock()
		return
	}
	k.err = err
	k.mu.Unlock()
	k.cancel(err)
}

var (
	errTxEnded   = errors.New("its transaction was committed or rolled back outside Release")
	errTxAborted = errors.New("a statement failed in its transaction, which PostgreSQL aborted at once, releasing the row lock")
)

func txGone(outcome pingOutcome) error {
	if outcome == pingTxAborted {
		return errTxAborted
	}
	return errTxEnded
}

// finish ends the transaction of the last hold and returns the connection.
func (h *hold) finish(ctx context.Context, commit bool) error {
	h.stopPinging()
	h.mu.Lock()
	lost, rollbackOnly := h.lost, h.rollbackOnly
	h.mu.Unlock()

	var err error
	clean := true
	switch {
	case lost != nil:
		clean = h.rollback() == nil
		err = lost
	case !commit:
		if rbErr := h.rollback(); rbErr != nil {
			clean = false
			err = lockkit.WrapDBError(fmt.Sprintf("forupdate: rollback %q", h.name), rbErr)
		}
	case rollbackOnly || ctx.Err() != nil:
		rbErr := h.rollback()
		clean = rbErr == nil
		why := "an inner hold called Rollback"
		if ctx.Err() != nil {
			why = "the context ended before Release"
		}
		err = fmt.Errorf("%w: %q: %s: %w", ErrRolledBack, h.name, why, errors.Join(ctx.Err(), rbErr))
	default:
		clean, err = h.commit(ctx)
		if errors.Is(err, dblock.ErrLockLost) {
			// Found at the commit: the transaction had ended already.
			h.metrics.Lost(context.WithoutCancel(ctx), metrics.CauseTransactionEnded)
		}
	}
	h.metrics.Held(context.WithoutCancel(ctx), clock.Now().Sub(h.acquired), errors.Is(err, dblock.ErrLockLost))
	h.txCancel()
	h.l.endSession(ctx, h.conn, clean, true)
	return err
}

func (h *hold) commit(ctx context.Context) (clean bool, err error) {
	// Canceling the transaction's context interrupts a commit that hangs
	// (a dead network) with drivers that honour it.
	stop := context.AfterFunc(ctx, h.txCancel)
	err = h.tx.Commit()
	interrupted := !stop()
	name := h.name
	switch {
	case err == nil:
		return true, nil
	case interrupted:
		return false, fmt.Errorf("forupdate: release %q: commit interrupted, its outcome is unknown: %w", name, errors.Join(ctx.Err(), err))
	case errors.Is(err, sql.ErrTxDone):
		return true, fmt.Errorf("%w: %q: %w", dblock.ErrLockLost, name, errTxEnded)
	case h.l.d.rolledBack(err):
		return true, fmt.Errorf("%w: %q: %w: %w", dblock.ErrLockLost, name, ErrRolledBack, errTxAborted)
	}
	return false, lockkit.WrapDBError(fmt.Sprintf("forupdate: release %q: commit", name), err)
}

// rollback ends the transaction; a transaction already ended is not an
// error.
func (h *hold) rollback() error {
	err := h.tx.Rollback()
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
