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
	started := clock.Now()
	a, err := l.prepare(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	a.sessionKey = l.sess.key(ctx) // Acquire's waiting reads it at every try
	out, sent, err := l.try(ctx, a)
	if err == nil && !out.acquired {
		err = dblock.ErrNotAcquired
	}
	l.record(ctx, metrics.ModeTry, err, started)
	if err != nil {
		return nil, err
	}
	return l.newLock(ctx, a, out.token, sent), nil
}

// record counts an acquisition that got past its arguments' checks, by
// outcome, with the time it took.
func (l *Locker) record(ctx context.Context, mode metrics.Mode, err error, started time.Time) {
	result := metrics.ResultAcquired
	switch {
	case errors.Is(err, dblock.ErrNotAcquired):
		result = metrics.ResultNotAcquired
	case err != nil:
		result = metrics.ResultError
	}
	l.metrics.Acquisition(context.WithoutCancel(ctx), mode, result, clock.Now().Sub(started))
}

// Acquire waits until name is held or ctx ends; see the package doc for
// how waiters are woken. When ctx ends first the error joins
// dblock.ErrNotAcquired and ctx.Err(). Other errors as TryAcquire.
//
// With dblock.Fair, a waiter that cannot take the lock at once joins the
// queue (package queue) and takes it only when all older live waiters have
// had it. Acquirers that are not fair never pass a live queue either: they
// take the lock only when no fair waiter is queued, but keep no place.
// Re-entering a lock the owner holds bypasses the queue.
func (l *Locker) Acquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	started := clock.Now()
	a, err := l.prepare(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	wt := l.startWaiting(a)
	k, err := wt.run(ctx)
	wt.end(ctx)
	l.record(ctx, metrics.ModeWait, err, started)
	if err != nil {
		return nil, err
	}
	return k, nil
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
