package forupdate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestReleaseWithEndedContextFreesTheLock: unlike a lock row with a lease,
// a forupdate lock lives in its transaction, and Release with a context
// that has already ended rolls that back (saying ErrRolledBack, the work
// in Tx being discarded): the lock is free at once for another Locker,
// never "released" while still held.
func TestReleaseWithEndedContextFreesTheLock(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			a, b := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)
			ctx, cancel := context.WithCancel(t.Context())
			k := acquire(t, ctx, a, name)
			cancel()
			if err := k.Release(ctx); !errors.Is(err, forupdate.ErrRolledBack) {
				t.Fatalf("Release with an ended context = %v, want ErrRolledBack", err)
			}
			if err := k.Err(); !errors.Is(err, dblock.ErrReleased) {
				t.Fatalf("Err after Release = %v, want ErrReleased", err)
			}
			other, err := b.TryAcquire(t.Context(), name)
			if err != nil {
				t.Fatalf("another Locker's TryAcquire after Release with an ended context: %v", err)
			}
			release(t, other)
		})
	}
}
