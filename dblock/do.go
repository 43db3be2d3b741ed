package dblock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// releaseTimeout bounds Do's release after ctx has ended.
const releaseTimeout = 10 * time.Second

// Do acquires name with l (waiting as Acquire does), runs fn with the lock's
// context, and releases the lock. fn's context is canceled when the lock is
// lost or ctx ends; fn should return promptly then. Do returns fn's error,
// joined with the release error or ErrLockLost when the lock was lost while
// fn ran.
func Do(ctx context.Context, l Locker, name string, fn func(ctx context.Context) error, opts ...Option) error {
	if l == nil {
		return fmt.Errorf("dblock: Do: nil Locker: %w", ErrInvalidOption)
	}
	if fn == nil {
		return fmt.Errorf("dblock: Do: nil function: %w", ErrInvalidOption)
	}
	lock, err := l.Acquire(ctx, name, opts...)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(lock.Context())
	// The lock's context ignores ctx's cancellation on purpose (the lock
	// outlives Acquire's deadline); fn should still stop when ctx does.
	stop := context.AfterFunc(ctx, cancel)
	fnErr := fn(runCtx)
	stop()
	cancel()

	// Release with a context that is not already canceled, so a canceled ctx
	// does not leave the lock held until its lease runs out.
	relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer relCancel()
	relErr := lock.Release(relCtx)
	if relErr != nil && errors.Is(relErr, ErrNotHeld) {
		relErr = nil
	}
	return errors.Join(fnErr, relErr)
}
