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
	if d := sent.Add(k.belief - safetyMargin(k.belief)); d.After(k.deadline) {
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
	interval := k.belief / 3
	retry := max(k.belief/20, 10*time.Millisecond)
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
	k.l.sess.Unregister(marked{k})
	k.l.cfg.logger.Warn("rowlock: lock lost", "name", k.h.name, "token", k.h.token, "error", cause)
	k.cancel(err)
}

// Causes of a loss that the metric tells apart.
var (
	errTakenOver    = errors.New("its row was taken over or deleted")
	errSessionEnded = errors.New("its session marker is gone or unproven")
	errNotHeld      = errors.New("CheckHeld found it not held")
)
