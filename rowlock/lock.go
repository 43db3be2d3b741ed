package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/clock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/metrics"
)

var _ dblock.Lock = (*Lock)(nil)

// Lock is one hold of a lock taken by a Locker. It is safe for concurrent
// use.
type Lock struct {
	l     *Locker
	h     holder
	ttl   time.Duration
	owner dblock.Owner

	ctx      context.Context
	cancel   context.CancelCauseFunc
	acquired time.Time // by the local clock, for the hold-time metric
	// metrics records the hold's measurements, with its lock type.
	metrics *metrics.Instruments

	mu       sync.Mutex
	deadline time.Time // by the local monotonic clock: lost unless renewed before
	err      error     // nil while held
	released bool
	// releasing: a Release is running; a second one says ErrNotHeld.
	releasing bool
	// renewStopped: a Release stopped the renewal; loopStarted is whether
	// its loop had started (renewDone is then closed once it has ended).
	renewStopped, loopStarted bool
	// lapse declares the lock lost at its deadline after a failed
	// Release, the renewal loop having stopped.
	lapse *time.Timer
	// lostWhileReleasing is a loss met while a Release ran: it counts
	// only if the release fails.
	lostWhileReleasing error
	// givenBack: released by a failed acquisition of a lock kind, never
	// handed to a caller, so its hold is not measured.
	givenBack bool

	// stopRenew cancels the renewal loop and any renewal in flight.
	stopRenew context.CancelFunc
	renewCtx  context.Context
	// renewStart starts the renewal loop when the first renewal is due;
	// renewDone is closed when the loop, once started, has ended.
	renewStart *time.Timer
	renewDone  chan struct{}
}

var (
	_ dblock.Lock   = (*Lock)(nil)
	_ dblock.Fencer = (*Lock)(nil)
)

// safetyMargin is how long before the database could consider the lease
// expired a holder that failed to renew declares the lock lost: a tenth of
// the TTL, time for the holder to stop working and for clocks that run at
// slightly different rates.
func safetyMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// won is the hold a won, with token, by a try sent at sent; nil when the
// answer came back after the hold's deadline (a commit the server held up:
// a synchronous standby away, a Galera membership change). Its lease may
// then have lapsed by the database clock, and someone else may hold the
// lock already: it is given back, and the try counts as not acquired.
func (l *Locker) won(ctx context.Context, a attempt, token int64, sent time.Time) *Lock {
	k := l.newLock(ctx, a, token, sent)
	k.mu.Lock()
	deadline := k.deadline
	k.mu.Unlock()
	if clock.Now().Before(deadline) {
		return k
	}
	l.cfg.logger.Warn("rowlock: an acquisition answered after its lease's deadline; giving it back", "name", a.name, "token", token)
	l.giveBack(ctx, []*Lock{k})
	return nil
}

// newLock is the hold a won, with token, by a try sent at sent.
func (l *Locker) newLock(acquireCtx context.Context, a attempt, token int64, sent time.Time) *Lock {
	// The lock outlives Acquire's context (often a timeout), but keeps its
	// values, and carries the owner so that acquiring with it re-enters.
	base := dblock.WithOwner(context.WithoutCancel(acquireCtx), a.ownerID)
	ctx, cancel := context.WithCancelCause(base)
	renewCtx, stopRenew := context.WithCancel(context.Background())
	in := a.metrics
	if in == nil {
		in = l.metrics
	}
	k := &Lock{
		l:         l,
		metrics:   in,
		h:         holder{name: a.name, host: a.host, ownerID: a.ownerID, token: token},
		ttl:       a.ttl,
		owner:     a.owner(),
		ctx:       ctx,
		cancel:    cancel,
		deadline:  sent.Add(a.ttl - safetyMargin(a.ttl)),
		acquired:  sent,
		renewCtx:  renewCtx,
		stopRenew: stopRenew,
		renewDone: make(chan struct{}),
	}
	// The loop starts when the first renewal is due, not now: most holds
	// end before that, and a goroutine started (and woken to end) for each
	// of them cost an uncontended acquire and release several percent on
	// a machine whose other threads were idle.
	firstRenewal := clock.Now().Add(k.ttl / 3)
	k.renewStart = time.AfterFunc(k.ttl/3, func() { k.renewLoop(firstRenewal) })
	if a.sessionKey != 0 {
		l.sess.register(k, a.sessionKey)
	}
	return k
}

// Name is the lock's name.
func (k *Lock) Name() string { return k.h.name }

// Token is the fencing token; reentrant holds share it.
func (k *Lock) Token() int64 { return k.h.token }

// Owner is who holds the lock.
func (k *Lock) Owner() dblock.Owner { return k.owner }

// Context carries the owner and is canceled when the lock is released or
// lost; context.Cause tells which.
func (k *Lock) Context() context.Context { return k.ctx }

// Done is closed when the lock is released or lost.
func (k *Lock) Done() <-chan struct{} { return k.ctx.Done() }

// Err is nil while held, then dblock.ErrReleased or an error wrapping
// dblock.ErrLockLost. It compares the renewal deadline with the clock
// itself, so it turns to ErrLockLost on time even when the renewal goroutine
// has not run yet (a paused process): check it right before acting on the
// lock, or better, fence the action with CheckHeld.
//
// The same holds for the lock's session marker (see the package doc, Crash
// detection): past the marker's deadline Err reports the lock lost even if
// the session's goroutine has not run yet.
func (k *Lock) Err() error {
	k.mu.Lock()
	err, deadline, done := k.err, k.deadline, k.released || k.releasing
	k.mu.Unlock()
	if err != nil || done {
		// While a Release runs the hold counts as held: if it fails,
		// releaseFailed declares any loss met meanwhile.
		return err
	}
	now := clock.Now()
	if !now.Before(deadline) {
		k.lose(errors.New("lease deadline passed before a renewal succeeded"))
		return k.Err()
	}
	if d, marked := k.l.sess.deadline(k); marked && !now.Before(d) {
		k.lose(fmt.Errorf("%w: its deadline passed before a heartbeat succeeded", errSessionEnded))
		return k.Err()
	}
	return nil
}

// TTL is how much of the hold's lease is sure to be left (redislock's TTL):
// the time until the deadline at which, unless a renewal succeeds first,
// the hold declares itself lost (Done, Err). It is measured as that
// deadline is, on the local monotonic clock: from when the last successful
// renewal (or the acquisition) was sent, the lease less a tenth. The
// database, whose clock alone judges the lease, counts from when it ran
// that statement, later: so by the database clock too the row stays this
// hold's for at least TTL. The background renewal moves the deadline on
// every lease/3, so while held TTL stays between about 0.57 and 0.9 of the
// lease. It does not count the session marker (see Crash detection): a
// hold whose session connection fails is lost sooner, within the crash
// grace, and Done says so. It is 0 once the hold is released or lost. It
// does no I/O.
func (k *Lock) TTL() time.Duration {
	if k.Err() != nil {
		return 0
	}
	k.mu.Lock()
	deadline := k.deadline
	k.mu.Unlock()
	return max(deadline.Sub(clock.Now()), 0)
}

// Refresh renews the lease now, as the background renewal does every TTL/3.
// It never shortens the lease (a longer reentrant hold's stays). Contention
// is retried until ctx ends. Errors: dblock.ErrNotHeld after Release; an
// error wrapping dblock.ErrLockLost if the lock was lost (Done is closed
// then too); an error wrapping ctx.Err() or a driver error, after which the
// lock is still held until its deadline.
func (k *Lock) Refresh(ctx context.Context) error {
	if err := lockinput.CheckContext(ctx); err != nil {
		return fmt.Errorf("rowlock: Refresh: %w", err)
	}
	k.mu.Lock()
	released, lost := k.released, k.err
	k.mu.Unlock()
	switch {
	case released:
		return dblock.ErrNotHeld
	case lost != nil:
		return lost
	}
	return k.renewOnce(ctx)
}

func (k *Lock) renewOnce(ctx context.Context) error {
	sent := clock.Now()
	var ok bool
	err := lockkit.RetryContentionUntilDone(ctx, func() (err error) {
		ok, err = k.l.store.renew(ctx, k.h, k.ttl)
		return err
	})
	if err != nil {
		return lockkit.WrapDBError("rowlock: renew "+fmt.Sprintf("%q", k.h.name), err)
	}
	if !ok {
		k.lose(errTakenOver)
		return k.Err()
	}
	k.mu.Lock()
	if d := sent.Add(k.ttl - safetyMargin(k.ttl)); d.After(k.deadline) {
		k.deadline = d
	}
	k.mu.Unlock()
	return nil
}

// renewLoop renews at next, then every TTL/3 and, after a failure, retries
// every TTL/20 until the deadline, when it declares the lock lost.
func (k *Lock) renewLoop(next time.Time) {
	defer close(k.renewDone)
	var stalled []chan error
	defer func() {
		for _, done := range stalled {
			<-done
		}
	}()
	interval := k.ttl / 3
	retry := max(k.ttl/20, 10*time.Millisecond)
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	var lastErr error
	for {
		k.mu.Lock()
		deadline := k.deadline
		k.mu.Unlock()
		wake := next
		if deadline.Before(wake) {
			wake = deadline
		}
		timer.Reset(time.Until(wake))
		select {
		case <-k.renewCtx.Done():
			return
		case <-timer.C:
		}
		k.mu.Lock()
		deadline = k.deadline
		k.mu.Unlock()
		if !clock.Now().Before(deadline) {
			if lastErr == nil {
				lastErr = errors.New("no renewal finished")
			}
			k.lose(fmt.Errorf("lease not renewed in time: %w", lastErr))
			return
		}
		// A renewal must not outlive the deadline, nor a Release.
		ctx, cancel := context.WithDeadline(k.renewCtx, deadline)
		err := k.renewBy(ctx, &stalled)
		cancel()
		if k.renewCtx.Err() != nil {
			return
		}
		switch {
		case errors.Is(err, dblock.ErrLockLost):
			return
		case err != nil:
			// A renewal the deadline cut short says less than the failure
			// before it (a read-only server, no server at all): that one
			// stays the cause.
			if lastErr == nil || !errors.Is(err, context.DeadlineExceeded) {
				lastErr = err
			}
			k.metrics.RenewalFailed(context.Background())
			k.l.cfg.logger.Warn("rowlock: renewal failed; retrying", "name", k.h.name, "error", err)
			next = clock.Now().Add(retry)
		default:
			lastErr = nil
			next = clock.Now().Add(interval)
		}
	}
}

// renewBy renews once, and returns ctx's error when ctx ends before the
// renewal has: statements stop at their context's end, but database/sql's
// Tx.Commit takes no context, and a renewal's COMMIT that the server
// holds up (a synchronous standby gone away, a Galera cluster's
// membership change) would keep the loop, and Done, waiting past the
// deadline while the lease it could not extend lapses. The loop then
// finds its deadline passed and declares the lock lost at once; the
// renewal still running is left in stalled, for the loop to wait for
// before it ends (it owns it).
func (k *Lock) renewBy(ctx context.Context, stalled *[]chan error) error {
	done := make(chan error, 1)
	go func() { done <- k.renewOnce(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-done:
		return err // it returned as ctx ended
	default:
		*stalled = append(*stalled, done)
		return ctx.Err()
	}
}

// lostCause is the metric's cause of a loss.
func lostCause(cause error) metrics.Cause {
	switch {
	case errors.Is(cause, dblock.ErrReadOnly):
		return metrics.CauseReadOnly
	case errors.Is(cause, errTakenOver), errors.Is(cause, errNotHeld):
		return metrics.CauseTakenOver
	case errors.Is(cause, errSessionEnded):
		return metrics.CauseSessionEnded
	}
	return metrics.CauseUnreachable
}

// Causes of a loss that the metric tells apart.
var (
	errTakenOver    = errors.New("its row was taken over or deleted")
	errSessionEnded = errors.New("its session marker is gone or unproven")
	errNotHeld      = errors.New("CheckHeld found it not held")
)

// lose marks the lock lost with cause, unless it was released already.
// While a Release runs the cause is kept: the hold is lost with it only if
// the release fails.
func (k *Lock) lose(cause error) {
	k.mu.Lock()
	if k.releasing && !k.released && k.err == nil {
		if k.lostWhileReleasing == nil {
			k.lostWhileReleasing = cause
		}
		k.mu.Unlock()
		return
	}
	if k.released || k.err != nil {
		k.mu.Unlock()
		return
	}
	k.err = fmt.Errorf("%w: %q: %w", dblock.ErrLockLost, k.h.name, cause)
	err := k.err
	k.mu.Unlock()
	k.metrics.Lost(context.Background(), lostCause(cause))
	k.metrics.Held(context.Background(), clock.Now().Sub(k.acquired), true)
	// A lost lock is renewed no more: its lease must be left to lapse (a
	// renewal would keep the row from everyone until the process ends).
	k.stopRenew()
	k.l.sess.unregister(k)
	k.l.cfg.logger.Warn("rowlock: lock lost", "name", k.h.name, "token", k.h.token, "error", cause)
	k.cancel(err)
}

// releaseTimeout bounds a release whose context had ended when Release was
// called, as dblock.Do bounds its own.
const releaseTimeout = 10 * time.Second

// Release gives up this hold. The last hold frees the lock at once, or with
// MinHold pending leaves it taken, by nobody, until acquisition + MinHold.
// Contention is retried until ctx ends.
//
// A lock often outlives the context it was acquired with (defer
// k.Release(ctx)): a ctx that has already ended when Release is called does
// not stop it. The release then runs with ctx's values only, bounded by a
// timeout of its own (10 s), as dblock.Do's does. A ctx still live bounds
// the release: if it ends first, Release returns an error wrapping
// ctx.Err().
//
// Errors: dblock.ErrNotHeld once released; an error wrapping
// dblock.ErrLockLost if the lock had been lost (its row, if still this
// hold's, is deleted all the same); an error wrapping ctx.Err() or the
// timeout's, or a driver error, when the release statement did not succeed.
// The hold then stays releasable: call Release again. Its renewal has
// stopped, so unless released it is lost (Done closed, Err wrapping
// dblock.ErrLockLost) by the time its lease could lapse; at once when the
// error is dblock.ErrInvalidDB (the *sql.DB was closed), which no later
// Release can overcome.
func (k *Lock) Release(ctx context.Context) error {
	// Checked before anything changes: a bad call must leave the lock held.
	if err := lockinput.CheckContext(ctx); err != nil {
		return fmt.Errorf("rowlock: Release: %w", err)
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
	}
	k.mu.Lock()
	if k.released || k.releasing {
		k.mu.Unlock()
		return dblock.ErrNotHeld
	}
	k.releasing = true
	lost, givenBack := k.err, k.givenBack
	if !k.renewStopped {
		// The renewal loop is stopped but not waited for until the
		// release is sent: waking it and waiting for it to exit would
		// put two goroutine switches in front of every release. A
		// renewal still in flight is harmless either way: before the
		// release it extends the lease the release then ends; after it,
		// it matches no row (the lock is free, or another holder's) or
		// extends the lease that reentrant holds of the same owner still
		// share, and, finding this hold releasing, it does not declare
		// the lock lost.
		k.renewStopped = true
		k.stopRenew()
		k.loopStarted = !k.renewStart.Stop()
	}
	loopStarted := k.loopStarted
	if k.lapse != nil {
		k.lapse.Stop()
	}
	k.mu.Unlock()

	var ok bool
	err := lockkit.RetryContentionUntilDone(ctx, func() (err error) {
		ok, err = k.l.store.release(ctx, k.h)
		return err
	})
	if err == nil {
		busyWaitlists.wakeFirst(k.h.name)
	}
	if loopStarted {
		<-k.renewDone
	}
	if err != nil {
		k.releaseFailed()
		if lockkit.ClassifyError(err) == lockkit.ClassClosed {
			// Nothing can release it through a closed *sql.DB: it is
			// lost now (its session connection goes with it) rather
			// than held until its deadline.
			k.lose(fmt.Errorf("its *sql.DB was closed before release: %w", err))
		}
		return lockkit.WrapDBError("rowlock: release "+fmt.Sprintf("%q", k.h.name), err)
	}
	// After the release statement: until it has run, the marker must stay
	// (a contender that saw it gone could cut the lease short).
	k.l.sess.unregister(k)
	if lost == nil && !givenBack {
		k.metrics.Held(context.WithoutCancel(ctx), clock.Now().Sub(k.acquired), false)
	}
	k.mu.Lock()
	k.released = true
	if k.err == nil {
		k.err = dblock.ErrReleased
	}
	k.mu.Unlock()
	k.cancel(dblock.ErrReleased)
	switch {
	case lost != nil:
		return lost
	case !ok:
		return fmt.Errorf("%w: %q: its row was taken over or deleted before release", dblock.ErrLockLost, k.h.name)
	}
	return nil
}

// releasable reports whether the hold may still be released: a Release
// failed, or none ran.
func (k *Lock) releasable() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return !k.released
}

// releaseFailed leaves the hold releasable after its release statement
// failed. No renewal keeps it now: it is declared lost when its deadline
// passes, as the renewal loop would have (Err checks it, and a timer makes
// sure Done is closed then even if nobody asks).
func (k *Lock) releaseFailed() {
	k.mu.Lock()
	k.releasing = false
	cause := k.lostWhileReleasing
	k.lostWhileReleasing = nil
	if k.err == nil && cause == nil {
		k.lapse = time.AfterFunc(k.deadline.Sub(clock.Now()), func() { _ = k.Err() })
	}
	k.mu.Unlock()
	if cause != nil {
		k.lose(cause)
	}
}

// CheckHeld proves, inside tx (a transaction on the lock's database), that
// this hold is still current: the row has this owner and token and an
// unexpired lease by the database clock. It locks the row in shared mode,
// so nobody can take the lock over until tx ends: writes made in tx before
// commit are fenced. Errors: an error wrapping dblock.ErrLockLost, or a
// driver error. Contention (tx lost a deadlock, or waited too long for the
// row) is not retried, since it may have aborted tx; it means the hold could
// not be proven, and is reported as ErrLockLost: roll tx back, and retry it
// if Err is still nil. Keep tx short: while it is open the holder's renewals wait
// for it too. On PostgreSQL use READ COMMITTED transactions: under
// REPEATABLE READ a renewal after tx began makes the check fail with a
// serialization error. On MySQL a failed check still holds a shared lock on
// the row of whoever holds the lock now; roll tx back promptly.
func (k *Lock) CheckHeld(ctx context.Context, tx *sql.Tx) error {
	if err := lockinput.CheckContext(ctx); err != nil {
		return fmt.Errorf("rowlock: CheckHeld: %w", err)
	}
	if tx == nil {
		return fmt.Errorf("rowlock: CheckHeld: %w: nil *sql.Tx", dblock.ErrInvalidOption)
	}
	ok, err := k.l.store.checkHeld(ctx, tx, k.h)
	if lockkit.ClassifyError(err) == lockkit.ClassContention {
		// The cause is text only: contention errors never reach callers.
		return fmt.Errorf("%w: %q: hold not proven, the transaction met contention (%v)", dblock.ErrLockLost, k.h.name, err)
	}
	if err != nil {
		return lockkit.WrapDBError("rowlock: check "+fmt.Sprintf("%q", k.h.name), err)
	}
	if !ok {
		// A definite answer, on the lock's database: the hold is over.
		// Done says so now, not at the next renewal.
		k.lose(errNotHeld)
		return fmt.Errorf("%w: %q: not held with token %d", dblock.ErrLockLost, k.h.name, k.h.token)
	}
	return nil
}
