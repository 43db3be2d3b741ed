package forupdate_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestManyNamesAtOnce: acquisitions of different names never get in each
// other's way. Many goroutines each take and release names of their own,
// with TryAcquire and Acquire, and every call must succeed: a lock on one
// name must not make another name's acquisition fail (on MariaDB, drawing
// the token took a table-wide AUTO-INC lock, which NOWAIT turned into an
// error when another acquisition held it).
func TestManyNamesAtOnce(t *testing.T) {
	const goroutines, rounds = 16, 40
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			l := newLocker(t, tg.DB)
			prefix := testdb.Name(t)
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Go(func() {
					ctx := context.Background()
					for r := range rounds {
						name := fmt.Sprintf("%s/%d/%d", prefix, g, r%4)
						var k dblock.Lock
						var err error
						if r%2 == 0 {
							k, err = l.TryAcquire(ctx, name)
						} else {
							k, err = l.Acquire(ctx, name)
						}
						if err == nil {
							err = k.Release(ctx)
						}
						if err != nil {
							errs <- fmt.Errorf("goroutine %d, round %d, %q: %w", g, r, name, err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}
