package rowlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestReadOnlyServer: a Locker whose pool reaches a read-only server (a
// standby after failover) says so with dblock.ErrReadOnly from every call,
// never "not acquired" (a cron job that is "not acquired" would quietly
// never run again), changes nothing, and a holder whose renewals fail that
// way loses the lock with ErrReadOnly as the cause.
func TestReadOnlyServer(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			sw := testdb.NewReadOnlySwitch(t, tg)
			l := newLocker(t, sw.DB)
			name := testdb.Name(t)
			wantReadOnly := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, dblock.ErrReadOnly) || errors.Is(err, dblock.ErrNotAcquired) {
					t.Errorf("%s on a read-only server = %v, want ErrReadOnly (and not ErrNotAcquired)", what, err)
				}
			}

			sw.Set(true)
			_, err := l.TryAcquire(ctx, name)
			wantReadOnly("TryAcquire", err)
			_, err = l.TryAcquire(ctx, name, dblock.Fair())
			wantReadOnly("TryAcquire, fair", err)
			// Acquire does not wait for ctx to end: retrying cannot help.
			waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
			_, err = l.Acquire(waitCtx, name)
			cancel()
			wantReadOnly("Acquire", err)
			_, err = l.Acquire(ctx, name, dblock.Fair())
			wantReadOnly("Acquire, fair", err)

			// A lock taken while writable: Refresh and Release say
			// read-only. The refused Refresh leaves the lock held; the
			// refused Release ends the handle (as any failed Release does:
			// renewal stops) but leaves the row as it was, so the lease
			// decides.
			sw.Set(false)
			k, err := l.TryAcquire(ctx, name, dblock.TTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			sw.Set(true)
			wantReadOnly("Refresh", k.Refresh(ctx))
			if err := k.Err(); err != nil {
				t.Fatalf("lock after a refused Refresh: %v, want still held", err)
			}
			wantReadOnly("Release", k.Release(ctx))
			sw.Set(false)
			if _, err := newLocker(t, tg.DB).TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("another owner's TryAcquire = %v, want ErrNotAcquired: the refused Release freed nothing", err)
			}
			expireNow(t, tg, name)

			// Renewals refused until the deadline: the lock is lost, and
			// says why.
			k, err = l.TryAcquire(ctx, name, dblock.TTL(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			sw.Set(true)
			waitDone(t, k, 10*time.Second)
			if err := k.Err(); !errors.Is(err, dblock.ErrLockLost) || !errors.Is(err, dblock.ErrReadOnly) {
				t.Fatalf("Err after renewals on a read-only server = %v, want ErrLockLost caused by ErrReadOnly", err)
			}
		})
	}
}
