package rowlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestReleaseWithEndedContext: a lock outlives the context it was taken
// with (defer k.Release(ctx) after ctx's deadline). Release with that ended
// context still frees it at once, for every kind on every dialect: another
// owner takes it without waiting for the lease. It kept the row for the
// whole TTL and said ErrReleased.
func TestReleaseWithEndedContext(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		for _, kind := range driverKinds {
			if tg.Dialect == dblock.SQLite && !kind.onSQLite {
				continue // the lock kinds need a server
			}
			t.Run(tg.Name+"/"+kind.name, func(t *testing.T) {
				t.Parallel()
				a, b := newLocker(t, tg.DB), newLocker(t, tg.DB)
				name := testdb.Name(t)
				ctx, cancel := context.WithCancel(t.Context())
				k, err := kind.take(ctx, a, name, false)
				if err != nil {
					t.Fatal(err)
				}
				cancel()
				if err := k.Release(ctx); err != nil {
					t.Fatalf("Release with an ended context: %v", err)
				}
				if err := k.Err(); !errors.Is(err, dblock.ErrReleased) {
					t.Fatalf("Err after Release = %v, want ErrReleased", err)
				}
				if err := k.Release(t.Context()); !errors.Is(err, dblock.ErrNotHeld) {
					t.Fatalf("second Release = %v, want ErrNotHeld", err)
				}
				r, err := kind.rival(t.Context(), b, name)
				if err != nil {
					t.Fatalf("another owner's take after Release with an ended context: %v (the row is still live)", err)
				}
				release(t, r)
			})
		}
	}
}

// TestFailedReleaseStaysReleasable: a Release whose statement fails (the
// connection is gone) leaves the hold held and releasable, never
// "released" while its row is live: Err stays nil, another owner still
// finds it held, and a second Release, once the database is back, frees
// it. It said ErrReleased at once, and the second Release ErrNotHeld.
func TestFailedReleaseStaysReleasable(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		for _, kind := range driverKinds {
			t.Run(tg.Name+"/"+kind.name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
				defer cancel()
				proxy := testdb.NewProxy(t, tg.HostPort())
				proxied := testdb.Open(t, tg, tg.DSNVia(proxy.Addr()))
				// No session marker: the session connection goes through the
				// proxy too, and its end would lose the lock, which is not
				// what this test is about.
				a := newLocker(t, proxied, rowlock.WithCrashGrace(0))
				b := newLocker(t, tg.DB)
				name := testdb.Name(t)
				k, err := kind.take(ctx, a, name, false)
				if err != nil {
					t.Fatal(err)
				}
				proxy.Cut()
				if err := k.Release(ctx); err == nil {
					t.Fatal("Release with the database cut off succeeded")
				}
				if err := k.Err(); err != nil {
					t.Fatalf("Err after a failed Release = %v, want nil: the row is still live", err)
				}
				select {
				case <-k.Done():
					t.Fatal("Done closed after a failed Release: the row is still live")
				default:
				}
				if r, err := kind.rival(ctx, b, name); !errors.Is(err, dblock.ErrNotAcquired) {
					if r != nil {
						_ = r.Release(ctx)
					}
					t.Fatalf("another owner's take after the failed Release = %v, want ErrNotAcquired", err)
				}
				proxy.Restore()
				if err := k.Release(ctx); err != nil {
					t.Fatalf("second Release, the database back: %v", err)
				}
				if err := k.Err(); !errors.Is(err, dblock.ErrReleased) {
					t.Fatalf("Err after Release = %v, want ErrReleased", err)
				}
				r, err := kind.rival(ctx, b, name)
				if err != nil {
					t.Fatalf("another owner's take after the second Release: %v", err)
				}
				release(t, r)
			})
		}
	}
}
