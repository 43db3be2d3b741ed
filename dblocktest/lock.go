package dblocktest

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
)

// Lock is one hold of a lock taken by an in-memory Locker. It implements
// dblock.Lock and dblock.Fencer. It is safe for concurrent use.
type Lock struct {
	l      *Locker
	name   string
	owner  dblock.Owner
	token  int64
	ctx    context.Context
	cancel context.CancelCauseFunc

	// Guarded by l.mu.
	err      error // nil while held; ErrReleased or the loss after
	released bool  // Release was called
}

func newLock(acquireCtx context.Context, l *Locker, name string, h *holder) *Lock {
	// The lock outlives Acquire's context and carries its values and the
	// owner, as the database Lockers' locks do.
	ctx, cancel := context.WithCancelCause(dblock.WithOwner(context.WithoutCancel(acquireCtx), h.owner.ID))
	return &Lock{l: l, name: name, owner: h.owner, token: h.token, ctx: ctx, cancel: cancel}
}

// Name is the lock's name.
func (k *Lock) Name() string { return k.name }

// Token is the fencing token: strictly increasing per name (the Locker
// counts for all its names), shared by reentrant holds.
func (k *Lock) Token() int64 { return k.token }

// Owner is who holds the lock.
func (k *Lock) Owner() dblock.Owner { return k.owner }

// Context carries the owner and the values of Acquire's context, and is
// canceled when this hold is released or the lock lost; context.Cause
// tells which.
func (k *Lock) Context() context.Context { return k.ctx }

// Done is closed when this hold is released or the lock lost.
func (k *Lock) Done() <-chan struct{} { return k.ctx.Done() }

// Err is nil while held, then dblock.ErrReleased or an error wrapping
// dblock.ErrLockLost and the cause given to Lapse or Lose.
func (k *Lock) Err() error {
	k.l.mu.Lock()
	defer k.l.mu.Unlock()
	return k.err
}

// Refresh has no lease to renew. Errors: dblock.ErrNotHeld after Release,
// an error wrapping dblock.ErrLockLost after Lapse or Lose, ctx's error
// when it has ended, dblock.ErrInvalidOption for a nil ctx.
func (k *Lock) Refresh(ctx context.Context) error {
	if err := lockinput.CheckContext(ctx); err != nil {
		return fmt.Errorf("dblocktest: Refresh: %w", err)
	}
	k.l.mu.Lock()
	defer k.l.mu.Unlock()
	switch {
	case k.released:
		return dblock.ErrNotHeld
	case k.err != nil:
		return k.err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dblocktest: Refresh: %w", err)
	}
	return nil
}

// Release gives up this hold; the last hold frees the lock, at once or,
// with MinHold pending, once it has passed. Errors: dblock.ErrNotHeld on a
// second Release, an error wrapping dblock.ErrLockLost if the lock was
// lost, dblock.ErrInvalidOption for a nil ctx (the lock stays held).
func (k *Lock) Release(ctx context.Context) error {
	if err := lockinput.CheckContext(ctx); err != nil {
		return fmt.Errorf("dblocktest: Release: %w", err)
	}
	k.l.mu.Lock()
	defer k.l.mu.Unlock()
	if k.released {
		return dblock.ErrNotHeld
	}
	k.released = true
	if k.err != nil {
		return k.err
	}
	k.err = dblock.ErrReleased
	k.cancel(dblock.ErrReleased)
	k.l.releaseLocked(k)
	return nil
}

// CheckHeld fails with an error wrapping dblock.ErrLockLost unless the
// lock is held now by this hold's owner with its token (another hold of
// the same owner counts, as in rowlock). There is no database: tx is not
// used and may be nil, and nothing keeps the lock from being lost after
// the check, as a database Locker's CheckHeld does until tx ends.
func (k *Lock) CheckHeld(ctx context.Context, tx *sql.Tx) error {
	if err := lockinput.CheckContext(ctx); err != nil {
		return fmt.Errorf("dblocktest: CheckHeld: %w", err)
	}
	k.l.mu.Lock()
	defer k.l.mu.Unlock()
	if e := k.l.names[k.name]; e != nil && e.holder != nil && e.holder.owner == k.owner && e.holder.token == k.token {
		return nil
	}
	return fmt.Errorf("dblocktest: %q: %w: not held with token %d", k.name, dblock.ErrLockLost, k.token)
}

var (
	_ dblock.Locker = (*Locker)(nil)
	_ dblock.Lock   = (*Lock)(nil)
	_ dblock.Fencer = (*Lock)(nil)
)
