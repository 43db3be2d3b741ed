package dblocktest

import (
	"errors"
	"testing"

	"github.com/sqllock/sqllock/dblock"
)

// tokens: successive holders of a name, through either Locker, get
// strictly larger tokens; with Harness.Lose, so does the holder after a
// loss.
func (s *suite) tokens(t *testing.T) {
	ctx := bounded(t)
	a, b := s.lockers(t)
	name := lockName(t)
	var last int64
	for i, l := range []dblock.Locker{a, a, b, a, b, b} {
		// Acquire: after a loss the name may be freed a moment later.
		k := acquireWithin(t, l, ctx, name)
		if i > 0 && k.Token() <= last {
			t.Fatalf("holder %d: token %d after %d, want it larger", i, k.Token(), last)
		}
		last = k.Token()
		if s.h.Lose != nil && i%3 == 1 {
			s.lose(t, k)
			continue
		}
		release(t, k)
	}
}

// lose makes k lost with Harness.Lose and waits until a Refresh reports it
// (a bound against hangs only: the Harness says the holder learns it at
// its next check).
func (s *suite) lose(t *testing.T, k dblock.Lock) {
	t.Helper()
	s.h.Lose(t, k)
	err := k.Refresh(t.Context())
	if !errors.Is(err, dblock.ErrLockLost) {
		t.Fatalf("Refresh after Harness.Lose = %v, want an error wrapping dblock.ErrLockLost", err)
	}
}

// lossByRefresh: after Harness.Lose, Refresh reports the loss, Done and
// Context are closed, Err and Release say the lock was lost, and another
// owner gets the lock with a larger token.
func (s *suite) lossByRefresh(t *testing.T) {
	ctx := bounded(t)
	a, b := s.lockers(t)
	name := lockName(t)
	k := hold(t, a, ctx, name, dblock.TTL(lossTTL))
	s.lose(t, k)
	if !isClosed(k.Done()) {
		t.Error("Done() open after Refresh reported the loss")
	}
	s.checkLost(t, k, b)
}

// lossInBackground: after Harness.Lose, Done closes without a call to the
// lock, and the rest follows as after lossByRefresh.
func (s *suite) lossInBackground(t *testing.T) {
	a, b := s.lockers(t)
	name := lockName(t)
	k := hold(t, a, t.Context(), name, dblock.TTL(lossTTL))
	s.h.Lose(t, k)
	waitClosed(t, k.Done(), "Done() of a lost lock")
	s.checkLost(t, k, b)
}

// checkLost checks a lock whose Done is closed by a loss, and that another
// owner, on other, then gets the lock.
func (s *suite) checkLost(t *testing.T, k dblock.Lock, other dblock.Locker) {
	t.Helper()
	ctx := bounded(t)
	if err := k.Err(); !errors.Is(err, dblock.ErrLockLost) {
		t.Errorf("Err() of a lost lock = %v, want an error wrapping dblock.ErrLockLost", err)
	}
	if k.Context().Err() == nil {
		t.Error("Context() of a lost lock not ended")
	}
	if err := k.Refresh(ctx); !errors.Is(err, dblock.ErrLockLost) {
		t.Errorf("Refresh of a lost lock = %v, want an error wrapping dblock.ErrLockLost", err)
	}
	// The lock may be freed a moment after the holder learned of the loss
	// (a killed session ends asynchronously): wait for it.
	next := acquireWithin(t, other, ctx, k.Name())
	if next.Token() <= k.Token() {
		t.Errorf("token after the loss %d, want more than the lost holder's %d", next.Token(), k.Token())
	}
	if err := k.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
		t.Errorf("Release of a lost lock = %v, want an error wrapping dblock.ErrLockLost", err)
	}
	if err := next.Err(); err != nil {
		t.Errorf("new holder after the lost one's Release: Err() = %v", err)
	}
	refused(t, other, ctx, k.Name(), "held by the new holder after the lost one's Release")
	release(t, next)
}

// checkHeld (for locks that implement dblock.Fencer): CheckHeld passes
// while the lock is held and reports dblock.ErrLockLost once it is
// released or lost.
func (s *suite) checkHeld(t *testing.T) {
	ctx := bounded(t)
	a, _ := s.lockers(t)
	name := lockName(t)
	check := func(k dblock.Lock) error {
		t.Helper()
		tx := s.h.Tx(t)
		if tx != nil {
			defer func() { _ = tx.Rollback() }()
		}
		return k.(dblock.Fencer).CheckHeld(ctx, tx)
	}
	k := hold(t, a, ctx, name, dblock.TTL(lossTTL))
	if err := check(k); err != nil {
		t.Fatalf("CheckHeld of a held lock = %v, want nil", err)
	}
	release(t, k)
	if err := check(k); !errors.Is(err, dblock.ErrLockLost) {
		t.Errorf("CheckHeld of a released lock = %v, want an error wrapping dblock.ErrLockLost", err)
	}
	if s.h.Lose == nil {
		return
	}
	k = hold(t, a, ctx, name, dblock.TTL(lossTTL))
	s.lose(t, k)
	if err := check(k); !errors.Is(err, dblock.ErrLockLost) {
		t.Errorf("CheckHeld of a lost lock = %v, want an error wrapping dblock.ErrLockLost", err)
	}
}
