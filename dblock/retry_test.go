package dblock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// countingLocker counts TryAcquire calls, and runs after (if set) once
// each has returned, with its number: the test's hook between attempts.
type countingLocker struct {
	dblock.Locker
	tries atomic.Int32
	after func(try int32, err error)
}

func (c *countingLocker) TryAcquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	lock, err := c.Locker.TryAcquire(ctx, name, opts...)
	try := c.tries.Add(1)
	if c.after != nil {
		c.after(try, err)
	}
	return lock, err
}

// retryLockers is every Locker of sqllock over every database it supports:
// rowlock over all three, forupdate over the servers.
func retryLockers(t *testing.T) map[string]dblock.Locker {
	lockers := map[string]dblock.Locker{}
	for _, tg := range testdb.AllTargets(t) {
		rl, err := rowlock.New(tg.DB)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rl.Close() })
		lockers["rowlock/"+tg.Name] = rl
		if tg.Dialect == dblock.SQLite {
			continue
		}
		fl, err := forupdate.New(tg.DB)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fl.Close() })
		lockers["forupdate/"+tg.Name] = fl
	}
	return lockers
}

// fastRetry retries without making the tests wait.
var fastRetry = dblock.Retry{Attempts: 4, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}

func TestTryAcquireRetry(t *testing.T) {
	for kind, l := range retryLockers(t) {
		t.Run(kind, func(t *testing.T) {
			ctx := t.Context()
			// hold takes name for another owner (a context without one
			// gets a fresh owner) and releases it when the test ends.
			hold := func(name string) dblock.Lock {
				held, err := l.TryAcquire(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = held.Release(context.Background()) })
				return held
			}

			t.Run("free: taken at the first attempt", func(t *testing.T) {
				c := &countingLocker{Locker: l}
				lock, err := dblock.TryAcquireRetry(ctx, c, testdb.Name(t), fastRetry)
				if err != nil {
					t.Fatal(err)
				}
				defer lock.Release(ctx)
				if n := c.tries.Load(); n != 1 {
					t.Errorf("%d attempts, want 1", n)
				}
			})

			t.Run("released after the second attempt: taken at the third", func(t *testing.T) {
				name := testdb.Name(t)
				held := hold(name)
				c := &countingLocker{Locker: l}
				c.after = func(try int32, err error) {
					if try == 2 {
						if !errors.Is(err, dblock.ErrNotAcquired) {
							t.Errorf("attempt 2 while held: %v, want ErrNotAcquired", err)
						}
						if err := held.Release(ctx); err != nil {
							t.Error(err)
						}
					}
				}
				lock, err := dblock.TryAcquireRetry(ctx, c, name, fastRetry, dblock.TTL(time.Minute))
				if err != nil {
					t.Fatalf("%v after %d attempts", err, c.tries.Load())
				}
				defer lock.Release(ctx)
				if n := c.tries.Load(); n != 3 || lock.Name() != name {
					t.Errorf("%d attempts for %q, want 3 for %q", n, lock.Name(), name)
				}
			})

			t.Run("never released: ErrNotAcquired after exactly Attempts", func(t *testing.T) {
				name := testdb.Name(t)
				hold(name)
				c := &countingLocker{Locker: l}
				_, err := dblock.TryAcquireRetry(ctx, c, name, fastRetry)
				if !errors.Is(err, dblock.ErrNotAcquired) || err.Error() != "dblock: not acquired (4 attempts)" {
					t.Errorf("%v, want ErrNotAcquired saying 4 attempts", err)
				}
				if n := c.tries.Load(); n != int32(fastRetry.Attempts) {
					t.Errorf("%d attempts, want %d", n, fastRetry.Attempts)
				}
			})

			t.Run("one attempt is TryAcquire", func(t *testing.T) {
				name := testdb.Name(t)
				hold(name)
				c := &countingLocker{Locker: l}
				// A bound for liveness: a pause after the last attempt
				// would wait the hour.
				lctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				_, err := dblock.TryAcquireRetry(lctx, c, name, dblock.Retry{Attempts: 1, Backoff: time.Hour})
				if !errors.Is(err, dblock.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) || c.tries.Load() != 1 {
					t.Errorf("%v after %d attempts, want ErrNotAcquired after 1 (and no pause)", err, c.tries.Load())
				}
			})

			t.Run("canceled between attempts", func(t *testing.T) {
				name := testdb.Name(t)
				hold(name)
				cctx, cancel := context.WithCancel(ctx)
				defer cancel()
				c := &countingLocker{Locker: l, after: func(int32, error) { cancel() }}
				_, err := dblock.TryAcquireRetry(cctx, c, name, dblock.Retry{Attempts: 10, Backoff: time.Hour})
				if !errors.Is(err, dblock.ErrNotAcquired) || !errors.Is(err, context.Canceled) || c.tries.Load() != 1 {
					t.Errorf("%v after %d attempts, want ErrNotAcquired and context.Canceled after 1", err, c.tries.Load())
				}
			})

			t.Run("deadline during a pause", func(t *testing.T) {
				name := testdb.Name(t)
				hold(name)
				dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
				c := &countingLocker{Locker: l}
				_, err := dblock.TryAcquireRetry(dctx, c, name, dblock.Retry{Attempts: 10, Backoff: time.Hour})
				if !errors.Is(err, dblock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%v, want ErrNotAcquired and context.DeadlineExceeded", err)
				}
				if n := c.tries.Load(); n != 1 {
					t.Errorf("%d attempts, want 1: the deadline came during the hour's pause", n)
				}
			})

			t.Run("other errors are not retried", func(t *testing.T) {
				c := &countingLocker{Locker: l}
				_, err := dblock.TryAcquireRetry(ctx, c, "", fastRetry)
				if !errors.Is(err, dblock.ErrInvalidName) || errors.Is(err, dblock.ErrNotAcquired) || c.tries.Load() != 1 {
					t.Errorf("empty name: %v after %d attempts, want ErrInvalidName after 1", err, c.tries.Load())
				}
			})
		})
	}
}

// TestTryAcquireRetryUnavailable: a server that cannot be reached is
// reported at the first attempt, as ErrUnavailable, not retried into
// ErrNotAcquired.
func TestTryAcquireRetryUnavailable(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			l, err := rowlock.New(testdb.Open(t, tg, tg.DSNVia(closedPort(t))), rowlock.WithDialect(tg.Dialect))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			c := &countingLocker{Locker: l}
			_, err = dblock.TryAcquireRetry(t.Context(), c, testdb.Name(t), fastRetry)
			wantUnavailable(t, "TryAcquireRetry", err)
			if n := c.tries.Load(); n != 1 {
				t.Errorf("%d attempts, want 1", n)
			}
		})
	}
}

// TestTryAcquireRetryBadInput: a nil Locker or a policy out of range is
// refused with a typed error, before any attempt.
func TestTryAcquireRetryBadInput(t *testing.T) {
	c := &countingLocker{Locker: nil}
	for what, r := range map[string]dblock.Retry{
		"zero Retry":              {},
		"no attempts":             {Attempts: 0, Backoff: time.Second},
		"negative attempts":       {Attempts: -1},
		"negative backoff":        {Attempts: 3, Backoff: -time.Millisecond},
		"negative max backoff":    {Attempts: 3, MaxBackoff: -time.Millisecond},
		"max backoff below first": {Attempts: 3, Backoff: time.Second, MaxBackoff: time.Millisecond},
	} {
		var oe *dblock.OptionError
		_, err := dblock.TryAcquireRetry(t.Context(), c, "x", r)
		if !errors.Is(err, dblock.ErrInvalidOption) || !errors.As(err, &oe) {
			t.Errorf("%s: %v, want an *OptionError wrapping ErrInvalidOption", what, err)
		}
	}
	if n := c.tries.Load(); n != 0 {
		t.Errorf("%d attempts with bad input, want none", n)
	}
	if _, err := dblock.TryAcquireRetry(t.Context(), nil, "x", fastRetry); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("nil Locker: %v, want ErrInvalidOption", err)
	}
}
