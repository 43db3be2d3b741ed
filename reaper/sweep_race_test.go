package reaper_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/reaper"
)

// TestTryAcquireDuringSweeps: a free lock is never refused because a sweep
// is deleting its row at that moment (a released row has lapsed, so a
// grace-0 reaper deletes it again and again while one acquirer cycles).
func TestTryAcquireDuringSweeps(t *testing.T) {
	for _, shared := range testdb.Targets(t) {
		t.Run(shared.Name, func(t *testing.T) {
			tg := isolated(t, shared, false)
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			r := newReaper(t, l, reaper.WithGrace(0))
			var stop atomic.Bool
			var deleted atomic.Int64
			swept := make(chan error, 1)
			go func() {
				for !stop.Load() {
					res, err := r.RunOnce(ctx)
					if err != nil {
						swept <- err
						return
					}
					deleted.Add(int64(res.Locks))
				}
				swept <- nil
			}()
			name := testdb.Name(t)
			refused, acquired := 0, 0
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
				k, err := l.TryAcquire(ctx, name)
				if errors.Is(err, dblock.ErrNotAcquired) {
					refused++
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				acquired++
				if err := k.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			stop.Store(true)
			if err := <-swept; err != nil {
				t.Fatalf("RunOnce: %v", err)
			}
			t.Logf("acquired %d, refused %d, rows swept %d", acquired, refused, deleted.Load())
			if deleted.Load() == 0 {
				t.Fatal("the sweeps never deleted the lock's row: the race was not exercised")
			}
			if refused != 0 {
				t.Fatalf("%d of %d TryAcquire calls on a free lock were refused during sweeps", refused, refused+acquired)
			}
		})
	}
}
