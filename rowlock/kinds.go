package rowlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
)

// giveBackTimeout bounds the releases of what a failed acquisition had
// taken, which run even when the caller's context has ended: a name left
// held would block others until its lease lapsed.
const giveBackTimeout = 10 * time.Second

// checkKindCall checks what every acquisition of a lock kind over several
// rows checks first, in this order: the context, that the Locker is open,
// the names (checkNames), the options. A bad call changes nothing.
func (l *Locker) checkKindCall(ctx context.Context, opts []dblock.Option, checkNames func() error) (dblock.Options, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return dblock.Options{}, fmt.Errorf("rowlock: %w", err)
	}
	if l.closed.Load() {
		return dblock.Options{}, dblock.ErrClosed
	}
	if err := checkNames(); err != nil {
		return dblock.Options{}, err
	}
	return lockinput.ResolveOptions(opts...)
}

// withOneOwner returns ctx carrying the owner of an acquisition of
// several rows: the one ctx carries, or a fresh one, so that every row is
// taken (and re-entered) by the same owner. carried is true when ctx
// carried it: that owner may hold some of the rows already.
func withOneOwner(ctx context.Context) (_ context.Context, owner dblock.Owner, carried bool, err error) {
	owner, err = lockinput.OwnerFor(ctx)
	if err != nil {
		return nil, dblock.Owner{}, false, err
	}
	if _, carried = dblock.OwnerFromContext(ctx); !carried {
		ctx = dblock.WithOwner(ctx, owner.ID)
	}
	return ctx, owner, carried, nil
}

// takeRow takes one row for owner (whom ctx carries) as Acquire (wait) or
// TryAcquire does. When the try fails without its outcome being known (ctx
// ended, or the connection failed, while a statement ran: the server may
// have taken the row all the same) and owner did not hold the row before
// (ownerHeld false), any hold owner has of it now is one nobody will ever
// release, and it is dropped, so that a failed acquisition leaves nothing
// held. MySQL may still run a statement whose client gave up, after that:
// such a hold lapses with its lease, as after a failed Acquire.
func (l *Locker) takeRow(ctx context.Context, name string, opts []dblock.Option, wait bool, owner dblock.Owner, ownerHeld bool) (*Lock, error) {
	var k dblock.Lock
	var err error
	if wait {
		k, err = l.Acquire(ctx, name, opts...)
	} else {
		k, err = l.TryAcquire(ctx, name, opts...)
	}
	if err == nil {
		return k.(*Lock), nil
	}
	if !ownerHeld && outcomeUnknown(ctx, err) {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
		if dropErr := l.kinds().dropHolds(dctx, name, owner); dropErr != nil {
			l.cfg.logger.Warn("rowlock: dropping a hold taken as its acquisition failed failed; it lapses with its lease",
				"name", name, "error", dropErr)
		}
		cancel()
		busyWaitlists.wakeFirst(name)
	}
	return nil, err
}

// outcomeUnknown reports whether a try that failed with err may have taken
// the row all the same: not when it was refused before any statement ran
// (bad input, a closed Locker) or the row was found held.
func outcomeUnknown(ctx context.Context, err error) bool {
	switch {
	case errors.Is(err, dblock.ErrInvalidName), errors.Is(err, dblock.ErrInvalidOption), errors.Is(err, dblock.ErrClosed):
		return false
	case errors.Is(err, dblock.ErrNotAcquired):
		return ctx.Err() != nil
	}
	return true
}

// giveBack releases, last first, what a failed acquisition had taken.
func (l *Locker) giveBack(ctx context.Context, taken []*Lock) {
	if len(taken) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	for i := len(taken) - 1; i >= 0; i-- {
		if err := taken[i].Release(ctx); err != nil && !errors.Is(err, dblock.ErrLockLost) {
			l.cfg.logger.Warn("rowlock: giving back a row after a failed acquisition failed; it lapses with its lease",
				"name", taken[i].Name(), "error", err)
		}
	}
}
