package dblock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Retry is a bounded retry policy for TryAcquireRetry: between TryAcquire,
// which gives up at once, and Acquire, which waits until ctx ends, it tries
// a fixed number of times with growing pauses. The zero Retry is invalid:
// Attempts must be set.
type Retry struct {
	// Attempts is how many times TryAcquire is called, at least 1.
	Attempts int

	// Backoff is the pause after the first attempt that found the lock
	// held; each later pause is twice the one before, up to MaxBackoff. At
	// least 0 (0: no pause at all).
	Backoff time.Duration

	// MaxBackoff caps the pauses; 0 (the default) means no cap other than
	// the doubling. Set it to Backoff for pauses that do not grow. At least
	// 0, and not below Backoff unless 0.
	MaxBackoff time.Duration
}

// TryAcquireRetry calls l.TryAcquire up to r.Attempts times, pausing
// between attempts as r says, and returns the lock as soon as one attempt
// takes it. Each pause is drawn at random between half of its length and
// all of it (jitter), so that contenders that failed together do not all
// try again together.
//
// Only ErrNotAcquired is retried. When every attempt found the lock held,
// the error wraps ErrNotAcquired and says how many attempts were made; when
// ctx ends first (during a pause or an attempt), it joins ErrNotAcquired
// and ctx.Err(), as Acquire's does. Any other error (ErrInvalidName,
// ErrUnavailable, ErrReadOnly, ...) is returned at once, unchanged: a
// database that cannot be reached is not retried here, since a policy sized
// for contention is seldom the one for an outage. A nil l, or r out of
// range, is refused before any attempt with an *OptionError wrapping
// ErrInvalidOption.
//
// It works with any Locker; opts are passed to every attempt.
func TryAcquireRetry(ctx context.Context, l Locker, name string, r Retry, opts ...Option) (Lock, error) {
	if l == nil {
		return nil, fmt.Errorf("dblock: TryAcquireRetry: nil Locker: %w", ErrInvalidOption)
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	pause := r.Backoff
	for attempt := 1; ; attempt++ {
		lock, err := l.TryAcquire(ctx, name, opts...)
		switch {
		case err == nil:
			return lock, nil
		case !errors.Is(err, ErrNotAcquired):
			return nil, err
		case ctx.Err() != nil:
			return nil, cutShort(ctx, err)
		case attempt == r.Attempts:
			return nil, fmt.Errorf("%w (%d attempts)", err, attempt)
		}
		if err := sleep(ctx, jitter(pause)); err != nil {
			return nil, errors.Join(ErrNotAcquired, err)
		}
		pause = r.next(pause)
	}
}

// validate refuses a policy out of range.
func (r Retry) validate() error {
	switch {
	case r.Attempts < 1:
		return &OptionError{Option: "Retry.Attempts", Reason: fmt.Sprintf("%d: must be at least 1", r.Attempts)}
	case r.Backoff < 0:
		return &OptionError{Option: "Retry.Backoff", Reason: fmt.Sprintf("%v: must not be negative", r.Backoff)}
	case r.MaxBackoff < 0:
		return &OptionError{Option: "Retry.MaxBackoff", Reason: fmt.Sprintf("%v: must not be negative", r.MaxBackoff)}
	case r.MaxBackoff != 0 && r.MaxBackoff < r.Backoff:
		return &OptionError{Option: "Retry.MaxBackoff", Reason: fmt.Sprintf("%v is below Backoff %v", r.MaxBackoff, r.Backoff)}
	}
	return nil
}

// next is the pause after pause: doubled, capped by MaxBackoff, and never
// overflowing.
func (r Retry) next(pause time.Duration) time.Duration {
	doubled := 2 * pause
	if doubled < pause { // overflowed
		doubled = time.Duration(1<<63 - 1)
	}
	if r.MaxBackoff != 0 && doubled > r.MaxBackoff {
		return r.MaxBackoff
	}
	return doubled
}

// jitter draws a pause between half of d and d.
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// sleep pauses for d, or returns ctx's error if ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// cutShort is the error of an attempt made while ctx ended: err itself
// when it already carries ctx's error (a Locker that says why), else
// ErrNotAcquired joined with it.
func cutShort(ctx context.Context, err error) error {
	if errors.Is(err, ctx.Err()) {
		return err
	}
	return errors.Join(ErrNotAcquired, ctx.Err())
}
