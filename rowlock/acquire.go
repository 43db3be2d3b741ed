package rowlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/clock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/metrics"
)

// TryAcquire takes name if it is free, its lease has lapsed, or the owner in
// ctx holds it already; otherwise it returns dblock.ErrNotAcquired at once.
// For a name used before it is one statement (an UPDATE of its row); a fresh
// name costs a second one that inserts the row (a short transaction on
// MySQL). If ctx ends before the statements return (a row locked by
// someone's transaction makes them wait), the error joins
// dblock.ErrNotAcquired and ctx.Err().
// Errors: dblock.ErrInvalidName, dblock.ErrInvalidOption, dblock.ErrClosed,
// dblock.ErrSchemaMissing, dblock.ErrInvalidDB, or a driver error.
func (l *Locker) TryAcquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	if err := callerName(name); err != nil {
		return nil, err
	}
	return asLock(l.tryAcquire(ctx, name, opts, l.metrics, true, true))
}

// tryAcquire is TryAcquire, the lock recording its hold through in, and
// the acquisition counted when count is set (a lock kind counts its own
// acquisitions, not those of the rows it takes). With nowait (TryAcquire's
// own) a row locked by another transaction is not waited for: see
// attempt.nowait.
func (l *Locker) tryAcquire(ctx context.Context, name string, opts []dblock.Option, in *metrics.Instruments, count, nowait bool) (*Lock, error) {
	started := clock.Now()
	a, err := l.prepare(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	a.metrics = in
	a.nowait = nowait
	a.sessionKey = l.sess.Key(ctx) // Acquire's waiting reads it at every try
	out, sent, err := l.try(ctx, a)
	if err != nil {
		l.dropOrphan(ctx, a)
	}
	var k *Lock
	if err == nil && out.acquired {
		k = l.won(ctx, a, out.token, sent)
	}
	if err == nil && k == nil {
		err = dblock.ErrNotAcquired
	}
	if count {
		record(ctx, in, metrics.ModeTry, err, started)
	}
	if err != nil {
		return nil, err
	}
	return k, nil
}

// asLock returns k as a dblock.Lock: nil, not a nil *Lock (or *Permit,
// *RWLock), with an error.
func asLock[K dblock.Lock](k K, err error) (dblock.Lock, error) {
	if err != nil {
		return nil, err
	}
	return k, nil
}

// record counts, through in, an acquisition that got past its arguments'
// checks, by outcome, with the time it took.
func record(ctx context.Context, in *metrics.Instruments, mode metrics.Mode, err error, started time.Time) {
	result := metrics.ResultAcquired
	switch {
	case errors.Is(err, dblock.ErrNotAcquired):
		result = metrics.ResultNotAcquired
	case err != nil:
		result = metrics.ResultError
	}
	in.Acquisition(context.WithoutCancel(ctx), mode, result, clock.Now().Sub(started))
}

// Acquire waits until name is held or ctx ends; docs/design.md (Waking
// waiters) says how waiters are woken. When ctx ends first the error joins
// dblock.ErrNotAcquired and ctx.Err(). Other errors as TryAcquire.
//
// With dblock.Fair, a waiter that cannot take the lock at once joins the
// queue (package queue) and takes it only when all older live waiters have
// had it. Acquirers that are not fair never pass a live queue either: they
// take the lock only when no fair waiter is queued, but keep no place.
// Re-entering a lock the owner holds bypasses the queue. A fair waiter
// leaves the queue after it took the lock: if the lock was lost meanwhile
// (that statement stalled past the lease), the error wraps
// dblock.ErrLockLost and nothing is held.
func (l *Locker) Acquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	if err := callerName(name); err != nil {
		return nil, err
	}
	return asLock(l.acquire(ctx, name, opts, l.metrics, true))
}

// acquire is Acquire, recording as tryAcquire does.
func (l *Locker) acquire(ctx context.Context, name string, opts []dblock.Option, in *metrics.Instruments, count bool) (*Lock, error) {
	started := clock.Now()
	a, err := l.prepare(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	a.metrics = in
	wt := l.startWaiting(a)
	k, err := wt.run(ctx)
	wt.end(ctx)
	if err == nil {
		err = l.lostBeforeReturned(ctx, "acquire", name, k)
	}
	if err != nil && wt.cutShort {
		l.dropOrphan(ctx, a)
	}
	if count {
		record(ctx, in, metrics.ModeWait, err, started)
	}
	if err != nil {
		return nil, err
	}
	return k, nil
}

// lostBeforeReturned is the last step of every acquisition that may run a
// statement after its take (a fair waiter leaving the queue, a semaphore's
// limit check, a reader's look at the writer row): if k was lost meanwhile
// (the statement stalled past k's deadline, as on a paused Galera node or
// during a frozen commit), someone else may hold the lock already, so k is
// given back and the error, naming the call (what, name), wraps
// dblock.ErrLockLost (TestKindsLostBeforeReturned). A take that answers
// late is caught earlier, by won, and tried again.
func (l *Locker) lostBeforeReturned(ctx context.Context, what, name string, k *Lock) error {
	lossErr := k.Err()
	if lossErr == nil {
		return nil
	}
	l.giveBack(ctx, []*Lock{k})
	return fmt.Errorf("rowlock: %s %q: %w", what, name, lossErr)
}

// prepare checks a call's arguments and state and returns its attempt.
func (l *Locker) prepare(ctx context.Context, name string, opts []dblock.Option) (attempt, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return attempt{}, fmt.Errorf("rowlock: %w", err)
	}
	if l.closed.Load() {
		return attempt{}, dblock.ErrClosed
	}
	if err := lockinput.ValidateName(name); err != nil {
		return attempt{}, err
	}
	o, err := lockinput.ResolveOptions(opts...)
	if err != nil {
		return attempt{}, err
	}
	owner, err := lockinput.OwnerFor(ctx)
	if err != nil {
		return attempt{}, err
	}
	if err := ctx.Err(); err != nil {
		return attempt{}, errors.Join(dblock.ErrNotAcquired, err)
	}
	return attempt{
		name: name, host: owner.Host, ownerID: owner.ID, note: o.Note,
		ttl: o.TTL, minHold: o.MinHold, fair: o.Fair,
	}, nil
}

// try runs a's statements once. sent is when the last of them was sent:
// the lease is measured from then.
func (l *Locker) try(ctx context.Context, a attempt) (outcome, time.Time, error) {
	var out outcome
	var sent time.Time
	err := lockkit.RetryContention(ctx, func() (err error) {
		sent = clock.Now()
		out, err = l.store.tryAcquire(ctx, a)
		return err
	})
	if err == nil {
		// After the take: the pool's first statements stay the store's
		// (pgxrow learns the path to the server from them).
		l.checkReplication(ctx)
	}
	switch {
	case err == nil:
		return out, sent, nil
	case ctxEnded(ctx) != nil:
		// Whatever the statement's error (contention retried until ctx
		// ran out, a statement cut short), the caller's context ended:
		// not acquired, never the driver's contention error.
		return outcome{}, sent, errors.Join(dblock.ErrNotAcquired, ctxEnded(ctx))
	case lockkit.ClassifyError(err) == lockkit.ClassContention:
		// Contenders kept colliding: someone else is taking it.
		return outcome{}, sent, nil
	}
	return outcome{}, sent, lockkit.WrapDBError("rowlock: acquire "+fmt.Sprintf("%q", a.name), err)
}

// dropOrphan undoes what a try cut short by the end of ctx may have done:
// the server may have run its take all the same (it finished as the client
// gave up, or it waited for the row lock and the server ran it once it got
// it although its client had gone, as PostgreSQL does: see
// TestCutShortTryLeavesNothingHeld). When the attempt's owner is fresh (ctx
// carries none), nobody else can hold the row under it and nobody would
// ever release such a hold, which would keep the name until its lease
// lapsed: any hold it has of the name is dropped. An owner that ctx
// carries may hold the row legitimately (a re-entry) and is left alone;
// so are the kinds' rows, whose acquisitions carry their owner and undo
// their own (takeRow). The drop runs in the background, so that the
// caller, whose context has ended, is not kept waiting (a late MySQL take
// holds the row lock the drop needs until it commits); Close waits for it.
// The drop waits for the take still running on the server (dropHoldsLocked
// says how). A statement still waiting for its row lock when the drop
// gives up (giveBackTimeout), or one still on its way to the server when
// the drop runs, leaves a hold that lapses with its lease.
func (l *Locker) dropOrphan(ctx context.Context, a attempt) {
	if _, carried := dblock.OwnerFromContext(ctx); carried || ctxEnded(ctx) == nil {
		return
	}
	l.orphanMu.Lock()
	if l.orphansDone {
		// After Close: nothing waits for a goroutine any more.
		l.orphanMu.Unlock()
		l.dropHolds(ctx, a.name, a.owner())
		return
	}
	l.orphans.Add(1)
	l.orphanMu.Unlock()
	go func() {
		defer l.orphans.Done()
		l.dropHolds(ctx, a.name, a.owner())
	}()
}

// dropHolds frees every hold owner has of name, within giveBackTimeout
// (ctx may have ended), and wakes the Locker's waiters of name.
func (l *Locker) dropHolds(ctx context.Context, name string, owner dblock.Owner) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	if err := l.store.dropHolds(dctx, name, owner); err != nil {
		l.cfg.logger.Warn("rowlock: could not drop a hold taken as its acquisition failed; it lapses with its lease",
			"name", name, "error", err)
	}
	l.waiters.WakeFirst(name)
}

// cutShort is what a wait ending with err returns: not acquired when ctx
// ended (whatever err says then), else err.
func cutShort(ctx context.Context, err error) error {
	if ended := ctxEnded(ctx); ended != nil {
		return errors.Join(dblock.ErrNotAcquired, ended)
	}
	return err
}

// ctxEnded is ctx.Err(), or context.DeadlineExceeded once ctx's deadline
// has passed even if ctx has not been told yet: a driver dialing with the
// deadline can fail ("i/o timeout") a moment before ctx.Err turns non-nil,
// and that is the caller's deadline, not a database error.
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if deadline, ok := ctx.Deadline(); ok && !clock.Now().Before(deadline) {
		return context.DeadlineExceeded
	}
	return nil
}
