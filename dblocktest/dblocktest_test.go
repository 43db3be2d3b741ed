package dblocktest_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/dblocktest"
	"github.com/sqllock/sqllock/internal/testdb"
)

func TestMain(m *testing.M) {
	// The in-memory Locker starts no goroutine; waiters stop with their
	// contexts.
	testdb.Main(m)
}

// memHarness runs the suite on one in-memory Locker, which is its own lock
// space: New returns it every time.
func memHarness(t *testing.T) dblocktest.Harness {
	mem := dblocktest.NewLocker()
	return dblocktest.Harness{
		New: func(*testing.T) dblock.Locker { return mem },
		Lose: func(t *testing.T, k dblock.Lock) {
			names := []string{k.Name()}
			if m, ok := k.(*dblocktest.MultiLock); ok {
				names = m.Names()
			}
			for _, name := range names {
				if !mem.Lapse(name) {
					t.Fatalf("Lapse(%q) found nothing to end", name)
				}
			}
		},
		Tx:                     func(*testing.T) *sql.Tx { return nil },
		Fair:                   true,
		MinHold:                true,
		ReentrantAcrossLockers: true,
		Semaphore: func(l dblock.Locker, limit int) (dblock.Semaphore, error) {
			return l.(*dblocktest.Locker).Semaphore(limit)
		},
		ReadWrite:    func(l dblock.Locker) dblock.RWLocker { return l.(*dblocktest.Locker) },
		WritersFirst: true,
		Multi: func(l dblock.Locker) (dblocktest.MultiFunc, dblocktest.MultiFunc) {
			m := l.(*dblocktest.Locker)
			return dblocktest.MultiOf(m.AcquireAll), dblocktest.MultiOf(m.TryAcquireAll)
		},
	}
}

func TestConformance(t *testing.T) {
	dblocktest.TestLocker(t, memHarness(t))
}

func TestLose(t *testing.T) {
	ctx := t.Context()
	mem := dblocktest.NewLocker()
	if mem.Lose("nobody/holds/this", nil) {
		t.Fatal("Lose of a free name reported a hold")
	}
	cause := errors.New("database unreachable")
	k, err := mem.TryAcquire(ctx, "jobs/a")
	if err != nil {
		t.Fatal(err)
	}
	inner, err := mem.TryAcquire(k.Context(), "jobs/a")
	if err != nil {
		t.Fatal(err)
	}
	if !mem.Held("jobs/a") {
		t.Fatal("Held = false while held")
	}
	if !mem.Lose("jobs/a", cause) {
		t.Fatal("Lose of a held name reported no hold")
	}
	for _, h := range []dblock.Lock{k, inner} {
		if !errors.Is(h.Err(), dblock.ErrLockLost) || !errors.Is(h.Err(), cause) {
			t.Errorf("Err() = %v, want dblock.ErrLockLost and the cause", h.Err())
		}
		if c := context.Cause(h.Context()); !errors.Is(c, cause) {
			t.Errorf("context.Cause = %v, want the cause", c)
		}
	}
	if mem.Held("jobs/a") {
		t.Fatal("Held = true after Lose")
	}
	next, err := mem.TryAcquire(ctx, "jobs/a")
	if err != nil {
		t.Fatalf("TryAcquire after Lose = %v", err)
	}
	// The lost handles end nothing of the next holder's.
	for _, h := range []dblock.Lock{k, inner} {
		if err := h.Release(ctx); !errors.Is(err, cause) {
			t.Errorf("Release of a lost hold = %v, want the loss", err)
		}
		if err := h.Release(ctx); !errors.Is(err, dblock.ErrNotHeld) {
			t.Errorf("second Release of a lost hold = %v, want dblock.ErrNotHeld", err)
		}
	}
	if next.Err() != nil || !mem.Held("jobs/a") {
		t.Fatalf("next holder after the lost handles' Release: Err %v, Held %v", next.Err(), mem.Held("jobs/a"))
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLapseEndsMinHold(t *testing.T) {
	ctx := t.Context()
	mem := dblocktest.NewLocker()
	k, err := mem.TryAcquire(ctx, "jobs/b", dblock.MinHold(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if mem.Held("jobs/b") {
		t.Error("Held = true for a lock kept by MinHold only")
	}
	if mem.Lose("jobs/b", nil) {
		t.Error("Lose reported a hold for a lock kept by MinHold only")
	}
	waiter := make(chan error, 1)
	go func() {
		w, err := mem.Acquire(ctx, "jobs/b")
		if err == nil {
			err = w.Release(ctx)
		}
		waiter <- err
	}()
	if _, err := mem.TryAcquire(ctx, "jobs/b"); !errors.Is(err, dblock.ErrNotAcquired) {
		t.Fatalf("TryAcquire within MinHold = %v, want dblock.ErrNotAcquired", err)
	}
	if !mem.Lapse("jobs/b") {
		t.Fatal("Lapse of a lock kept by MinHold reported nothing")
	}
	if err := <-waiter; err != nil {
		t.Fatalf("waiter after Lapse: %v", err)
	}
	if mem.Lapse("jobs/b") {
		t.Error("Lapse of a free name reported something")
	}
}

// TestMinHoldPasses: a waiter behind a MinHold gets the lock once it has
// passed, woken by the time, not by a release.
func TestMinHoldPasses(t *testing.T) {
	ctx := t.Context()
	mem := dblocktest.NewLocker()
	k, err := mem.TryAcquire(ctx, "jobs/c", dblock.MinHold(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := mem.Acquire(ctx, "jobs/c")
	if err != nil {
		t.Fatalf("Acquire behind a MinHold = %v", err)
	}
	if w.Token() <= k.Token() {
		t.Errorf("token %d after %d", w.Token(), k.Token())
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFairOrder: fair waiters get the lock in the order they queued, and
// neither a TryAcquire nor an Acquire that is not fair passes the queue.
func TestFairOrder(t *testing.T) {
	ctx := t.Context()
	mem := dblocktest.NewLocker()
	const name = "jobs/d"
	holder, err := mem.TryAcquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 5
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Go(func() {
			k, err := mem.Acquire(ctx, name, dblock.Fair())
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if err := k.Release(ctx); err != nil {
				t.Error(err)
			}
		})
		// The next waiter starts once this one waits, so the queue's
		// order is the loop's.
		waitFor(t, func() bool { return mem.Waiting(name) == i+1 })
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Queued waiters are left, or the holder is one of them: either way
	// an acquirer that is not fair gets nothing while the queue lasts.
	if k, err := mem.TryAcquire(ctx, name); err == nil {
		mu.Lock()
		left := waiters - len(order)
		mu.Unlock()
		if left > 0 {
			t.Errorf("TryAcquire passed %d queued fair waiters", left)
		}
		_ = k.Release(ctx)
	}
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("fair waiters got the lock in the order %v, want the order they queued", order)
		}
	}
	if len(order) != waiters {
		t.Fatalf("%d fair waiters got the lock, want %d", len(order), waiters)
	}
}

// TestWaiting: Waiting counts the Acquire calls waiting for a name, and
// one that gives up is counted out.
func TestWaiting(t *testing.T) {
	ctx := t.Context()
	mem := dblocktest.NewLocker()
	const name = "jobs/e"
	k, err := mem.TryAcquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if n := mem.Waiting(name); n != 0 {
		t.Fatalf("Waiting = %d with no waiter", n)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := mem.Acquire(wctx, name, dblock.Fair())
		done <- err
	}()
	waitFor(t, func() bool { return mem.Waiting(name) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, dblock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled waiter = %v", err)
	}
	if n := mem.Waiting(name); n != 0 {
		t.Fatalf("Waiting = %d after the waiter gave up", n)
	}
	// The canceled fair waiter left the queue: the name is free once
	// released, for anyone.
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := mem.TryAcquire(ctx, name)
	if err != nil {
		t.Fatalf("TryAcquire after the fair waiter gave up = %v", err)
	}
	_ = next.Release(ctx)
}

// waitFor polls cond until it holds, failing the test after a bound
// against hangs (not a timing assertion).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within a minute")
		}
		time.Sleep(time.Millisecond)
	}
}
