package dblocktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

func (s *suite) tryAcquire(t *testing.T) {
	ctx := bounded(t)
	a, b := s.lockers(t)
	name := lockName(t)
	k := hold(t, a, ctx, name)
	if k.Name() != name {
		t.Errorf("Name() = %q, want %q", k.Name(), name)
	}
	if err := k.Err(); err != nil {
		t.Errorf("Err() of a held lock = %v, want nil", err)
	}
	if isClosed(k.Done()) {
		t.Error("Done() of a held lock is closed")
	}
	if err := k.Context().Err(); err != nil {
		t.Errorf("Context() of a held lock ended: %v", err)
	}
	if err := k.Refresh(ctx); err != nil {
		t.Errorf("Refresh of a held lock = %v, want nil", err)
	}
	refused(t, a, ctx, name, "another owner, same Locker")
	refused(t, b, ctx, name, "another owner, another Locker")
	release(t, k)
	if got := free(t, b, ctx, name, "after Release"); got <= k.Token() {
		t.Errorf("token after Release %d, want more than %d", got, k.Token())
	}
}

func (s *suite) acquireWaits(t *testing.T) {
	ctx := bounded(t)
	a, b := s.lockers(t)
	name := lockName(t)
	k := hold(t, a, ctx, name)
	waiter := acquireAsync(t, b, ctx, name)
	// Give the waiter time to start waiting: an Acquire that returns
	// instead is then caught here. A correct Locker passes however long
	// this is; "Acquire gives up when its context ends" catches an
	// Acquire that never waits whatever the timing.
	time.Sleep(50 * time.Millisecond)
	select {
	case r := <-waiter:
		if r.lock != nil {
			releaseAtEnd(t, r.lock)
		}
		t.Fatalf("Acquire of a held lock returned (%v) before its Release", r.err)
	default:
	}
	release(t, k)
	r := await(t, waiter)
	if r.err != nil {
		t.Fatalf("waiting Acquire after Release = %v, want the lock", r.err)
	}
	if r.lock.Token() <= k.Token() {
		t.Errorf("waiter's token %d, want more than the holder's %d", r.lock.Token(), k.Token())
	}
	refused(t, a, ctx, name, "held by the waiter")
}

func (s *suite) acquireContext(t *testing.T) {
	ctx := bounded(t)
	a, b := s.lockers(t)
	name := lockName(t)
	k := hold(t, a, ctx, name)
	for _, c := range []struct {
		how  string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 100*time.Millisecond)
		}, context.DeadlineExceeded},
		{"canceled while waiting", func() (context.Context, context.CancelFunc) {
			c, cancel := context.WithCancel(ctx)
			stop := time.AfterFunc(100*time.Millisecond, cancel)
			return c, func() { stop.Stop(); cancel() }
		}, context.Canceled},
		{"canceled before", func() (context.Context, context.CancelFunc) {
			c, cancel := context.WithCancel(ctx)
			cancel()
			return c, cancel
		}, context.Canceled},
	} {
		for _, l := range []struct {
			which  string
			locker dblock.Locker
		}{{"same Locker", a}, {"another Locker", b}} {
			actx, cancel := c.ctx()
			got, err := l.locker.Acquire(actx, name)
			cancel()
			if err == nil {
				releaseAtEnd(t, got)
				t.Fatalf("%s, %s: Acquire of a held lock = the lock, want an error", c.how, l.which)
			}
			if !errors.Is(err, dblock.ErrNotAcquired) || !errors.Is(err, c.want) {
				t.Errorf("%s, %s: Acquire = %v, want dblock.ErrNotAcquired joined with %v", c.how, l.which, err, c.want)
			}
		}
	}
	// The waiters that gave up left nothing behind.
	if err := k.Err(); err != nil {
		t.Fatalf("holder after the waiters gave up: Err() = %v", err)
	}
	release(t, k)
	free(t, b, ctx, name, "after the waiters gave up and the holder released")
}

func (s *suite) lockContext(t *testing.T) {
	type key struct{}
	a, _ := s.lockers(t)
	name := lockName(t)
	actx, cancel := context.WithCancel(context.WithValue(bounded(t), key{}, "from Acquire's context"))
	k, err := a.Acquire(actx, name)
	if err != nil {
		t.Fatalf("Acquire(%q) = %v", name, err)
	}
	releaseAtEnd(t, k)
	cancel()
	if err := k.Context().Err(); err != nil {
		t.Errorf("Context() ended with Acquire's context: %v", err)
	}
	if err := k.Err(); err != nil {
		t.Errorf("Err() after Acquire's context ended = %v, want nil", err)
	}
	if v := k.Context().Value(key{}); v != "from Acquire's context" {
		t.Errorf("Context().Value = %v, want the value of Acquire's context", v)
	}
	owner, ok := dblock.OwnerFromContext(k.Context())
	if !ok || owner != k.Owner() {
		t.Errorf("Context() carries owner %+v (%v), want Owner() %+v", owner, ok, k.Owner())
	}
	if k.Owner().ID == "" {
		t.Error("Owner().ID is empty")
	}
	refused(t, a, t.Context(), name, "after Acquire's context ended")
	release(t, k)
}

func (s *suite) independentNames(t *testing.T) {
	ctx := bounded(t)
	a, b := s.lockers(t)
	name := lockName(t)
	k := hold(t, a, ctx, name)
	for _, other := range []string{name + "/child", name + "x", name[:len(name)-1]} {
		free(t, b, ctx, other, "a name other than the held "+name)
	}
	if err := k.Err(); err != nil {
		t.Errorf("holder after other names were taken: Err() = %v", err)
	}
	release(t, k)
}

func (s *suite) released(t *testing.T) {
	ctx := bounded(t)
	a, _ := s.lockers(t)
	name := lockName(t)
	k := hold(t, a, ctx, name)
	release(t, k)
	if !isClosed(k.Done()) {
		t.Error("Done() open after Release")
	}
	if err := k.Context().Err(); err == nil {
		t.Error("Context() not ended after Release")
	}
	if err := k.Err(); !errors.Is(err, dblock.ErrReleased) {
		t.Errorf("Err() after Release = %v, want dblock.ErrReleased", err)
	}
	if err := k.Release(ctx); !errors.Is(err, dblock.ErrNotHeld) {
		t.Errorf("second Release = %v, want dblock.ErrNotHeld", err)
	}
	if err := k.Refresh(ctx); !errors.Is(err, dblock.ErrNotHeld) {
		t.Errorf("Refresh after Release = %v, want dblock.ErrNotHeld", err)
	}
	// The released handle's calls did not touch the next holder.
	next := hold(t, a, ctx, name)
	if err := k.Release(ctx); !errors.Is(err, dblock.ErrNotHeld) {
		t.Errorf("Release of an old handle while another holds the lock = %v, want dblock.ErrNotHeld", err)
	}
	if err := next.Err(); err != nil {
		t.Errorf("next holder after the old handle's Release: Err() = %v", err)
	}
	refused(t, a, ctx, name, "held by the next holder")
	release(t, next)
}

func (s *suite) minHold(t *testing.T) {
	ctx := bounded(t)
	a, b := s.lockers(t)
	name := lockName(t)
	if !s.h.MinHold {
		k, err := a.TryAcquire(ctx, name, dblock.MinHold(time.Minute))
		if err == nil {
			releaseAtEnd(t, k)
		}
		if !errors.Is(err, dblock.ErrInvalidOption) {
			t.Fatalf("TryAcquire with MinHold, which the Harness says is not supported, = %v, want dblock.ErrInvalidOption", err)
		}
		free(t, b, ctx, name, "after MinHold was refused")
		return
	}
	// Far longer than the test: the lock must still be taken right after
	// its early Release, however slow the machine.
	k := hold(t, a, ctx, name, dblock.MinHold(time.Hour))
	release(t, k)
	if err := k.Err(); !errors.Is(err, dblock.ErrReleased) {
		t.Errorf("Err() after an early Release = %v, want dblock.ErrReleased", err)
	}
	refused(t, a, ctx, name, "released before its MinHold passed")
	refused(t, b, ctx, name, "released before its MinHold passed")
}
