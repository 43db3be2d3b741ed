package rowlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/metrics"
)

// giveBackTimeout bounds the releases of what a failed acquisition had
// taken, which run even when the caller's context has ended: a name left
// held would block others until its lease lapsed.
const giveBackTimeout = 10 * time.Second

// callerName refuses a name given to a plain lock that contains
// kindSeparator: it could name a row of a lock kind (a plain lock "cfg␟w"
// would hold the write lock of "cfg"). Other names go on to prepare's
// checks, in their order.
func callerName(name string) error {
	if !strings.Contains(name, kindSeparator) {
		return nil
	}
	return lockinput.ValidateCallerName(name)
}

// recordKind counts, through in, an acquisition of a lock kind that got
// past its arguments' checks (started then), by outcome: Acquire's (wait)
// or TryAcquire's.
func recordKind(ctx context.Context, in *metrics.Instruments, wait bool, err error, started time.Time) {
	mode := metrics.ModeTry
	if wait {
		mode = metrics.ModeWait
	}
	record(ctx, in, mode, err, started)
}

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
	if l.cfg.dialect == dblock.SQLite {
		return dblock.Options{}, errKindsOnSQLite
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

// takeMode says how a take of one row waits.
type takeMode int

const (
	// takeNow is TryAcquire's: it waits neither for a holder nor for a
	// row lock that another transaction holds (a fenced transaction's,
	// say): either means not acquired.
	takeNow takeMode = iota
	// takeOnce tries once, as TryAcquire, but waits for a row lock held
	// by another transaction: for the kinds that wait for holders
	// themselves, and must not pass over a fenced transaction still open.
	takeOnce
	// takeWait is Acquire's: it waits until the row is held.
	takeWait
)

// takeMode is the mode of a kind's try of one of its rows, in an
// acquisition that waits or not.
func tryMode(wait bool) takeMode {
	if wait {
		return takeOnce
	}
	return takeNow
}

// takeRow takes one row for owner (whom ctx carries) as Acquire
// (takeWait) or TryAcquire does. A try may fail without its outcome being
// known: ctx ended, or the connection failed, while a statement ran, and
// the server may have taken the row all the same. If owner did not hold the
// row before (ownerHeld false), any hold owner has of it now is one nobody
// will ever release. It is dropped, so a failed acquisition leaves nothing
// held. MySQL may still run a statement whose client gave up, after that:
// such a hold lapses with its lease, as after a failed Acquire.
//
// The row's hold records its measurements through in (the lock type of
// the kind); its acquisition is not counted: the kind counts its own.
func (l *Locker) takeRow(ctx context.Context, name string, opts []dblock.Option, mode takeMode, owner dblock.Owner, ownerHeld bool, in *metrics.Instruments) (*Lock, error) {
	var k *Lock
	var err error
	if mode == takeWait {
		k, err = l.acquire(ctx, name, opts, in, false)
	} else {
		k, err = l.tryAcquire(ctx, name, opts, in, false, mode == takeNow)
	}
	if err == nil {
		return k, nil
	}
	if !ownerHeld && outcomeUnknown(ctx, err) {
		l.dropHolds(ctx, name, owner)
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

// giveBack releases, last first, what a failed acquisition had taken,
// without measuring those holds: no caller ever had them.
func (l *Locker) giveBack(ctx context.Context, taken []*Lock) {
	if len(taken) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	for i := len(taken) - 1; i >= 0; i-- {
		taken[i].mu.Lock()
		taken[i].givenBack = true
		taken[i].mu.Unlock()
		if err := taken[i].Release(ctx); err != nil && !errors.Is(err, dblock.ErrLockLost) {
			l.cfg.logger.Warn("rowlock: giving back a row after a failed acquisition failed; it lapses with its lease",
				"name", taken[i].Name(), "error", err)
		}
	}
}
