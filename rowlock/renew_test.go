package rowlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestShortInnerHoldKeepsOuterLease: a reentrant hold with a short TTL must
// not shorten the lease of the long hold around it. Its renewals push the
// lease only forward, so after it is released the row stays held for the
// outer hold's TTL, judged by the database clock.
func TestShortInnerHoldKeepsOuterLease(t *testing.T) {
	const outerTTL, innerTTL = time.Minute, time.Second
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l, stranger := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)
			outer, err := l.Acquire(ctx, name, dblock.TTL(outerTTL))
			if err != nil {
				t.Fatal(err)
			}
			defer release(t, outer)
			outerExpiry := expiresAtMicros(t, tg, name)
			inner, err := l.Acquire(outer.Context(), name, dblock.TTL(innerTTL))
			if err != nil {
				t.Fatal(err)
			}
			// A renewal of the inner hold, as its background loop sends
			// every TTL/3.
			if err := inner.Refresh(ctx); err != nil {
				t.Fatalf("inner Refresh: %v", err)
			}
			if got := expiresAtMicros(t, tg, name); got < outerExpiry {
				t.Fatalf("inner renewal moved expires_at back by %v", time.Duration(outerExpiry-got)*time.Microsecond)
			}
			release(t, inner)
			// Past the inner TTL by the database clock: a lease the inner
			// hold had shortened would have lapsed by now.
			waitDBClockPast(t, tg, dbNowMicros(t, tg)+innerTTL.Microseconds())
			if k, err := stranger.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				if err == nil {
					release(t, k)
				}
				t.Fatalf("another owner's TryAcquire while the outer hold is open = %v, want ErrNotAcquired", err)
			}
			if err := outer.Err(); err != nil {
				t.Fatalf("outer hold: %v", err)
			}
			if err := outer.Refresh(ctx); err != nil {
				t.Fatalf("outer Refresh: %v", err)
			}
		})
	}
}
