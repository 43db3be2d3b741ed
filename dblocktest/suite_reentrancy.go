package dblocktest

import (
	"errors"
	"sync"
	"testing"

	"github.com/sqllock/sqllock/dblock"
)

// reentrancy: an owner re-enters its own lock through WithOwner and
// through the lock's Context, sharing token and owner; other owners stay
// out until the last hold is released, whatever the order.
func (s *suite) reentrancy(t *testing.T) {
	ctx := bounded(t)
	a, b := s.lockers(t)
	name := lockName(t)
	owned := dblock.WithOwner(ctx, "dblocktest-owner")
	outer := hold(t, a, owned, name)
	if outer.Owner().ID != "dblocktest-owner" {
		t.Errorf("Owner().ID = %q, want the id given to WithOwner", outer.Owner().ID)
	}
	byOwner, err := a.Acquire(dblock.WithOwner(ctx, "dblocktest-owner"), name)
	if err != nil {
		t.Fatalf("Acquire by the holding owner (WithOwner) = %v, want it re-entered", err)
	}
	releaseAtEnd(t, byOwner)
	byContext := hold(t, a, outer.Context(), name)
	for _, k := range []dblock.Lock{byOwner, byContext} {
		if k.Token() != outer.Token() || k.Owner() != outer.Owner() {
			t.Errorf("re-entered hold: token %d owner %+v, want the first hold's %d, %+v", k.Token(), k.Owner(), outer.Token(), outer.Owner())
		}
	}
	refused(t, a, ctx, name, "another owner, three holds")
	refused(t, b, ctx, name, "another owner on another Locker, three holds")

	// Released in another order than taken: the lock stays until the last.
	release(t, outer)
	if err := outer.Err(); !errors.Is(err, dblock.ErrReleased) {
		t.Errorf("Err() of a released hold = %v, want dblock.ErrReleased", err)
	}
	for _, k := range []dblock.Lock{byOwner, byContext} {
		if err := k.Err(); err != nil {
			t.Errorf("other hold after one was released: Err() = %v, want nil", err)
		}
	}
	refused(t, b, ctx, name, "two holds left")
	release(t, byContext)
	refused(t, b, ctx, name, "one hold left")
	if err := byOwner.Refresh(ctx); err != nil {
		t.Errorf("Refresh of the last hold = %v", err)
	}
	release(t, byOwner)
	if got := free(t, b, ctx, name, "after the last hold was released"); got <= outer.Token() {
		t.Errorf("token after the last hold %d, want more than %d", got, outer.Token())
	}
}

// concurrentReentry: goroutines of one owner acquire a free name at the
// same time; all get it, as one hold with one token.
func (s *suite) concurrentReentry(t *testing.T) {
	const n = 4
	a, b := s.lockers(t)
	name := lockName(t)
	owned := dblock.WithOwner(bounded(t), "dblocktest-concurrent-owner")
	locks := make([]dblock.Lock, n)
	var wg sync.WaitGroup
	for i := range locks {
		wg.Go(func() {
			k, err := a.Acquire(owned, name)
			if err != nil {
				t.Errorf("Acquire %d by one owner = %v", i, err)
				return
			}
			locks[i] = k
		})
	}
	wg.Wait()
	for _, k := range locks {
		if k != nil {
			releaseAtEnd(t, k)
		}
	}
	if t.Failed() {
		return
	}
	for _, k := range locks[1:] {
		if k.Token() != locks[0].Token() {
			t.Errorf("one owner's concurrent acquisitions got tokens %d and %d, want one", locks[0].Token(), k.Token())
		}
	}
	for _, k := range locks {
		refused(t, b, t.Context(), name, "one owner's holds left")
		release(t, k)
	}
	free(t, b, t.Context(), name, "after all of one owner's holds")
}

// reentryAcrossLockers (with Harness.ReentrantAcrossLockers): an owner
// holding a lock through one Locker re-enters it through another.
func (s *suite) reentryAcrossLockers(t *testing.T) {
	ctx := bounded(t)
	a, b := s.lockers(t)
	name := lockName(t)
	outer := hold(t, a, ctx, name)
	inner := hold(t, b, outer.Context(), name)
	if inner.Token() != outer.Token() {
		t.Errorf("re-entered through another Locker: token %d, want %d", inner.Token(), outer.Token())
	}
	release(t, outer)
	refused(t, a, ctx, name, "the hold through the other Locker left")
	release(t, inner)
	free(t, a, ctx, name, "after both holds")
}
