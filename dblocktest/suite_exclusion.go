package dblocktest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

// ledger records who is inside the critical section of one name: a
// second holder entering before the first left is an overlap, and the
// tokens of holders, in the order they entered, must grow.
type ledger struct {
	mu      sync.Mutex
	inside  int64 // token of the holder inside, 0 when none
	last    int64
	entered int
}

func (g *ledger) enter(k dblock.Lock) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.entered++
	switch {
	case g.inside != 0:
		return fmt.Errorf("overlap: the holder with token %d got the lock while the one with token %d held it", k.Token(), g.inside)
	case k.Token() <= g.last:
		return fmt.Errorf("token %d after token %d: did not grow", k.Token(), g.last)
	}
	g.inside, g.last = k.Token(), k.Token()
	return nil
}

func (g *ledger) leave(k dblock.Lock) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inside == k.Token() {
		g.inside = 0
	}
}

// exclusion has goroutines on two Lockers take one name in turns, some
// waiting with Acquire (some of them fair, when the Locker supports it),
// some retrying TryAcquire, each staying inside a while so that an
// overlapping holder would be caught.
func (s *suite) exclusion(t *testing.T) {
	goroutines, rounds := 8, 6
	if testing.Short() {
		goroutines, rounds = 4, 4
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*hangBound)
	defer cancel()
	a, b := s.lockers(t)
	lockers := []dblock.Locker{a, b}
	name := lockName(t)
	var g ledger
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			l := lockers[i%len(lockers)]
			var opts []dblock.Option
			if s.h.Fair && i%4 == 1 {
				opts = append(opts, dblock.Fair())
			}
			take := l.Acquire
			if i%4 == 3 {
				take = func(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
					return retryTry(ctx, l, name, opts...)
				}
			}
			for range rounds {
				k, err := take(ctx, name, opts...)
				if err != nil {
					t.Errorf("goroutine %d: %v", i, err)
					return
				}
				if err := g.enter(k); err != nil {
					t.Error(err)
				}
				runtime.Gosched()
				time.Sleep(time.Millisecond)
				g.leave(k)
				if err := k.Release(ctx); err != nil {
					t.Errorf("goroutine %d: Release: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if g.entered != goroutines*rounds {
		t.Errorf("%d acquisitions, want %d", g.entered, goroutines*rounds)
	}
}

// retryTry calls TryAcquire until it gets the lock, an error other than
// dblock.ErrNotAcquired, or ctx ends.
func retryTry(ctx context.Context, l dblock.Locker, name string, opts ...dblock.Option) (dblock.Lock, error) {
	for {
		k, err := l.TryAcquire(ctx, name, opts...)
		if !errors.Is(err, dblock.ErrNotAcquired) || ctx.Err() != nil {
			return k, err
		}
		time.Sleep(time.Millisecond)
	}
}
