package rowlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestFairWaiterRekeysAfterSessionRestart: when a fair waiter's Locker
// loses its session connection (the server ends it) and starts a new one,
// the waiter's queue row takes the new session marker; with the old one,
// which is gone for good, every other Locker would keep cutting its place
// short (found by the model, see model/README.md).
func TestFairWaiterRekeysAfterSessionRestart(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			name := testdb.Name(t)
			holder, err := newLocker(t, tg.DB).TryAcquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			defer release(t, holder)
			waitCtx, stop := context.WithCancel(ctx)
			defer stop()
			done := make(chan error, 1)
			go func() {
				_, err := newLocker(t, tg.DB).Acquire(waitCtx, name, dblock.Fair())
				done <- err
			}()
			key := func() int64 {
				q := tg.Q(`SELECT session_key FROM dblock_waiters WHERE name = $1`)
				var k int64
				if err := tg.DB.QueryRowContext(ctx, q, name).Scan(&k); err != nil {
					return 0
				}
				return k
			}
			eventually(t, ctx, "the fair waiter to queue with a session marker", func() bool { return key() != 0 })
			old := key()
			killSessionOfKey(t, tg, old)
			eventually(t, ctx, "the waiter's row to take its new session marker", func() bool {
				k := key()
				return k != 0 && k != old
			})
			stop()
			<-done
		})
	}
}
