package dblocktest

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

// slotted is a permit: a hold with a slot.
type slotted interface{ Slot() int }

// slotOf returns k's slot, failing the test when k has none.
func slotOf(t *testing.T, k dblock.Lock) int {
	t.Helper()
	p, ok := underlying(k).(slotted)
	if !ok {
		t.Fatalf("the semaphore's lock %T has no Slot() int", k)
	}
	return p.Slot()
}

// semaphoreRules checks the semaphore rules. A semaphore of limit n admits
// n owners at once, on n distinct slots, and refuses the next. An owner
// has one permit, re-entered with its Context. Another limit while
// permits are held is dblock.ErrLimitMismatch at once, also for Acquire.
// A waiter gets the slot a holder leaves, with a larger token. The limit
// changes once no one holds a permit. Bad limits are refused.
func (s *suite) semaphoreRules(t *testing.T) {
	t.Run("limit", s.semaphoreLimit)
	t.Run("limit mismatch", s.semaphoreMismatch)
	t.Run("exclusion under concurrency", s.semaphoreExclusion)
	t.Run("bad limit", func(t *testing.T) {
		for _, limit := range []int{0, -1} {
			if _, err := s.h.Semaphore(s.h.New(t), limit); !errors.Is(err, dblock.ErrInvalidOption) {
				t.Errorf("Semaphore(%d) = %v, want dblock.ErrInvalidOption", limit, err)
			}
		}
	})
}

func (s *suite) semaphoreLimit(t *testing.T) {
	const limit = 3
	ctx := bounded(t)
	a, b := s.semaphore(t, s.h.New(t), limit), s.semaphore(t, s.h.New(t), limit)
	name := lockName(t)
	var held []dblock.Lock
	slots := map[int]bool{}
	for i := range limit {
		k := hold(t, []dblock.Locker{a, b}[i%2], ctx, name)
		if k.Name() != name {
			t.Errorf("Name() = %q, want %q", k.Name(), name)
		}
		slot := slotOf(t, k)
		if slot < 0 || slot >= limit || slots[slot] {
			t.Fatalf("permit %d on slot %d; slots taken: %v", i, slot, slots)
		}
		slots[slot] = true
		held = append(held, k)
	}
	refused(t, a, ctx, name, "every permit held")
	refused(t, b, ctx, name, "every permit held, another Locker")

	// One permit per owner: its Context re-enters it, at the limit
	// (through the Locker that took it: reentrancy across Lockers is the
	// base suite's, with Harness.ReentrantAcrossLockers).
	again := hold(t, a, held[0].Context(), name)
	if slotOf(t, again) != slotOf(t, held[0]) || again.Token() != held[0].Token() {
		t.Errorf("re-entered permit: slot %d token %d, want slot %d token %d", slotOf(t, again), again.Token(), slotOf(t, held[0]), held[0].Token())
	}
	release(t, again)
	if err := held[0].Err(); err != nil {
		t.Fatalf("permit after its re-entered hold was released: Err() = %v", err)
	}

	// A waiter gets the slot that is given back.
	waiter := acquireAsync(t, b, ctx, name)
	leaving := held[1]
	release(t, leaving)
	r := await(t, waiter)
	if r.err != nil {
		t.Fatalf("waiting Acquire after a Release = %v, want a permit", r.err)
	}
	if slotOf(t, r.lock) != slotOf(t, leaving) || r.lock.Token() <= leaving.Token() {
		t.Errorf("waiter got slot %d token %d, want slot %d with a token above %d", slotOf(t, r.lock), r.lock.Token(), slotOf(t, leaving), leaving.Token())
	}
	refused(t, a, ctx, name, "every permit held again")
	for _, k := range []dblock.Lock{held[0], held[2], r.lock} {
		release(t, k)
	}
	// Nobody holds a permit: another limit is taken now.
	free(t, s.semaphore(t, s.h.New(t), limit+1), ctx, name, "after every permit was given back, with another limit")
}

func (s *suite) semaphoreMismatch(t *testing.T) {
	ctx := bounded(t)
	name := lockName(t)
	two := s.semaphore(t, s.h.New(t), 2)
	for range 2 {
		hold(t, two, ctx, name)
	}
	for _, limit := range []int{1, 3} {
		other := s.semaphore(t, s.h.New(t), limit)
		for _, call := range []struct {
			how  string
			take func(context.Context, string, ...dblock.Option) (dblock.Lock, error)
		}{{"TryAcquire", other.TryAcquire}, {"Acquire", other.Acquire}} {
			k, err := call.take(ctx, name)
			if err == nil {
				releaseAtEnd(t, k)
			}
			if !errors.Is(err, dblock.ErrLimitMismatch) {
				t.Errorf("%s with limit %d while holders use 2 = %v, want dblock.ErrLimitMismatch", call.how, limit, err)
			}
		}
	}
}

// semaphoreExclusion: goroutines on two Lockers take permits of one name
// in turns; never more than the limit inside, never two on one slot, and
// each slot's tokens grow.
func (s *suite) semaphoreExclusion(t *testing.T) {
	const limit = 2
	goroutines, rounds := 6, 5
	if testing.Short() {
		goroutines, rounds = 4, 3
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*hangBound)
	defer cancel()
	lockers := []dblock.Locker{s.semaphore(t, s.h.New(t), limit), s.semaphore(t, s.h.New(t), limit)}
	name := lockName(t)
	var mu sync.Mutex
	inside := map[int]int64{} // slot -> token inside
	last := map[int]int64{}
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			l := lockers[i%len(lockers)]
			for range rounds {
				k, err := l.Acquire(ctx, name)
				if err != nil {
					t.Errorf("goroutine %d: %v", i, err)
					return
				}
				slot := slotOf(t, k)
				mu.Lock()
				switch {
				case len(inside) >= limit:
					t.Errorf("permit on slot %d while %d were held (limit %d): %v", slot, len(inside), limit, inside)
				case inside[slot] != 0:
					t.Errorf("slot %d given to token %d while token %d held it", slot, k.Token(), inside[slot])
				case k.Token() <= last[slot]:
					t.Errorf("slot %d: token %d after %d, want it larger", slot, k.Token(), last[slot])
				}
				inside[slot], last[slot] = k.Token(), k.Token()
				mu.Unlock()
				runtime.Gosched()
				time.Sleep(time.Millisecond)
				mu.Lock()
				delete(inside, slot)
				mu.Unlock()
				if err := k.Release(ctx); err != nil {
					t.Errorf("goroutine %d: Release: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.Logf("last tokens per slot: %v", last)
	}
}
