package forupdate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestReadOnlyServer: on a read-only server (a standby after failover) the
// lock's transaction cannot lock or create its row, and Acquire and
// TryAcquire say so with dblock.ErrReadOnly, never "not acquired", for a
// name whose row exists and for a new one. A held lock needs no write after
// it is taken (its transaction holds the row until it ends), so Refresh and
// Release have no read-only case: its failover case is the connection
// dying, which loses the lock (TestCutConnectionReleasesAtOnce,
// TestPartitionedHolder).
func TestReadOnlyServer(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			sw := testdb.NewReadOnlySwitch(t, tg)
			l := newLocker(t, sw.DB)
			existing, fresh := testdb.Name(t), testdb.Name(t)
			release(t, acquire(t, ctx, l, existing))

			sw.Set(true)
			for _, name := range []string{existing, fresh} {
				_, err := l.TryAcquire(ctx, name)
				if !errors.Is(err, dblock.ErrReadOnly) || errors.Is(err, dblock.ErrNotAcquired) {
					t.Errorf("TryAcquire on a read-only server = %v, want ErrReadOnly (and not ErrNotAcquired)", err)
				}
				waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
				_, err = l.Acquire(waitCtx, name)
				cancel()
				if !errors.Is(err, dblock.ErrReadOnly) || errors.Is(err, dblock.ErrNotAcquired) {
					t.Errorf("Acquire on a read-only server = %v, want ErrReadOnly (and not ErrNotAcquired)", err)
				}
			}
			sw.Set(false)
			release(t, acquire(t, ctx, l, fresh))
		})
	}
}
