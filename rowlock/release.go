package rowlock

import (
	"context"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/clock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
)

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
//
// Its complexity (over 15) is the release's cases (not held, re-entrant,
// last hold, an ended context, a failed statement) and their bookkeeping,
// which must run in this order.
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
		k.l.waiters.WakeFirst(k.h.name)
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
	k.l.sess.Unregister(marked{k})
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
