package rowlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestSmallPool: a PostgreSQL listener keeps a pool connection checked out.
// In a pool of one it would hold the only connection, and with two Lockers
// on a pool of two the two listeners would hold both, starving every try,
// renewal and release. A listener starts only when the pool can spare a
// connection; the other waiters poll.
func TestSmallPool(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			for _, maxOpen := range []int{1, 2} {
				t.Run(fmt.Sprintf("max %d", maxOpen), func(t *testing.T) {
					smallPool(t, tg, maxOpen)
				})
			}
		})
	}
}

// smallPool runs a holder and one fair waiter per Locker, maxOpen Lockers
// on a pool of maxOpen connections.
func smallPool(t *testing.T, tg testdb.Target, maxOpen int) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
	defer cancel()
	db := testdb.Open(t, tg, tg.DSN)
	db.SetMaxOpenConns(maxOpen)
	var lockers []*rowlock.Locker
	for range maxOpen {
		lockers = append(lockers, newLocker(t, db))
	}
	observer := newLocker(t, tg.DB)
	name := testdb.Name(t)
	holder, err := lockers[0].TryAcquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, maxOpen)
	for i, l := range lockers {
		go func() {
			k, err := l.Acquire(ctx, name, dblock.Fair())
			if err == nil {
				err = k.Release(ctx)
			}
			got <- err
		}()
		waitQueued(t, observer, name, i+1)
	}
	if err := holder.Refresh(ctx); err != nil {
		t.Fatalf("Refresh while waiters wait: %v", err)
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatalf("Release while waiters wait: %v", err)
	}
	for range maxOpen {
		if err := <-got; err != nil {
			t.Fatalf("waiter: %v", err)
		}
	}
}
