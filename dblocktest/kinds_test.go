package dblocktest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/dblocktest"
)

// kindLockers are the in-memory Locker's kinds, each as a dblock.Locker.
func kindLockers(t *testing.T, mem *dblocktest.Locker) []struct {
	kind string
	l    dblock.Locker
} {
	sem, err := mem.Semaphore(2)
	if err != nil {
		t.Fatal(err)
	}
	return []struct {
		kind string
		l    dblock.Locker
	}{{"lock", mem}, {"semaphore", sem}, {"readers", mem.Readers()}, {"writers", mem.Writers()}, {"AcquireAll", multi{mem}}}
}

// multi is the in-memory AcquireAll of one name, as a dblock.Locker.
type multi struct{ mem *dblocktest.Locker }

func (m multi) Acquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return dblocktest.MultiOf(m.mem.AcquireAll)(ctx, []string{name}, opts...)
}

func (m multi) TryAcquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return dblocktest.MultiOf(m.mem.TryAcquireAll)(ctx, []string{name}, opts...)
}

// TestKindsHeldWaitingLapse: Held, Waiting, Lapse and Lose see the holds
// and waiters of every kind of a name.
func TestKindsHeldWaitingLapse(t *testing.T) {
	ctx := t.Context()
	for _, end := range []struct {
		how  string
		end  func(mem *dblocktest.Locker, name string) bool
		want error
	}{
		{"Lapse", func(mem *dblocktest.Locker, name string) bool { return mem.Lapse(name) }, dblock.ErrLockLost},
		{"Lose", func(mem *dblocktest.Locker, name string) bool { return mem.Lose(name, dblock.ErrReadOnly) }, dblock.ErrReadOnly},
	} {
		mem := dblocktest.NewLocker()
		for _, k := range kindLockers(t, mem) {
			t.Run(end.how+"/"+k.kind, func(t *testing.T) {
				name := "jobs/" + k.kind
				if mem.Held(name) {
					t.Fatal("Held before any acquisition")
				}
				h, err := k.l.TryAcquire(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				if !mem.Held(name) {
					t.Fatal("Held = false while held")
				}
				// A waiter of the same kind (a writer for a reader; for the
				// semaphore of two, once both permits are held) counts
				// among the name's waiters.
				waiter := k.l
				if k.kind == "readers" {
					waiter = mem.Writers()
				}
				if k.kind == "semaphore" {
					other, err := k.l.TryAcquire(ctx, name)
					if err != nil {
						t.Fatal(err)
					}
					defer other.Release(ctx)
				}
				wctx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() {
					w, err := waiter.Acquire(wctx, name)
					if err == nil {
						_ = w.Release(ctx)
					}
					done <- err
				}()
				waitFor(t, func() bool { return mem.Waiting(name) == 1 })
				if !end.end(mem, name) {
					t.Fatalf("%s reported nothing held", end.how)
				}
				<-h.Done()
				if err := h.Err(); !errors.Is(err, dblock.ErrLockLost) || !errors.Is(err, end.want) {
					t.Errorf("Err() after %s = %v, want dblock.ErrLockLost and %v", end.how, err, end.want)
				}
				err = <-done
				if k.kind == "readers" {
					// The writer waiting for the reader held the writer's
					// place, which was lost too, as with rowlock.
					if !errors.Is(err, dblock.ErrLockLost) {
						t.Errorf("writer waiting for a reader, after %s = %v, want dblock.ErrLockLost", end.how, err)
					}
				} else if err != nil {
					t.Errorf("waiter after %s = %v, want the lock", end.how, err)
				}
				cancel()
				if err := h.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
					t.Errorf("Release of a lost hold = %v, want dblock.ErrLockLost", err)
				}
				if mem.Held(name) || mem.Waiting(name) != 0 {
					t.Errorf("after %s and the waiter's Release: Held %v, Waiting %d", end.how, mem.Held(name), mem.Waiting(name))
				}
			})
		}
	}
}

// TestKindsRefuseSeparator: no kind takes a name containing the kinds'
// separator, which could name another name's rows.
func TestKindsRefuseSeparator(t *testing.T) {
	mem := dblocktest.NewLocker()
	for _, k := range kindLockers(t, mem) {
		for _, name := range []string{"cfg\u241fw", "api\u241fs0", "\u241f"} {
			if _, err := k.l.TryAcquire(t.Context(), name); !errors.Is(err, dblock.ErrInvalidName) {
				t.Errorf("%s: TryAcquire(%q) = %v, want dblock.ErrInvalidName", k.kind, name, err)
			}
		}
	}
}

// TestKindNamesTooLong: a name whose rows would be too long is refused by
// the kinds that derive rows from it, as rowlock refuses it; the others
// take it.
func TestKindNamesTooLong(t *testing.T) {
	mem := dblocktest.NewLocker()
	name := strings.Repeat("n", dblock.MaxNameLength-2)
	for _, k := range kindLockers(t, mem) {
		derives := k.kind == "semaphore" || k.kind == "readers" || k.kind == "writers"
		h, err := k.l.TryAcquire(t.Context(), name)
		switch {
		case derives && !errors.Is(err, dblock.ErrInvalidName):
			t.Errorf("%s of %d bytes: %v, want dblock.ErrInvalidName", k.kind, len(name), err)
		case !derives && err != nil:
			t.Errorf("%s of %d bytes: %v, want it taken", k.kind, len(name), err)
		}
		if err == nil {
			_ = h.Release(t.Context())
		}
	}
}

// TestSemaphoreLimits: limits out of range are refused.
func TestSemaphoreLimits(t *testing.T) {
	mem := dblocktest.NewLocker()
	for _, limit := range []int{0, -1, dblocktest.MaxSemaphoreLimit + 1} {
		if _, err := mem.Semaphore(limit); !errors.Is(err, dblock.ErrInvalidOption) {
			t.Errorf("Semaphore(%d) = %v, want dblock.ErrInvalidOption", limit, err)
		}
	}
	if s, err := mem.Semaphore(dblocktest.MaxSemaphoreLimit); err != nil || s.Limit() != dblocktest.MaxSemaphoreLimit {
		t.Errorf("Semaphore(MaxSemaphoreLimit) = %v, %v", s, err)
	}
}

// TestFairSemaphore: with Fair, permits go to fair waiters in the order
// they came, and a fair TryAcquire does not pass them.
func TestFairSemaphore(t *testing.T) {
	ctx := t.Context()
	mem := dblocktest.NewLocker()
	sem, err := mem.Semaphore(1)
	if err != nil {
		t.Fatal(err)
	}
	const name = "fair/sem"
	holder, err := sem.TryAcquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 3
	got := make(chan int, waiters)
	for i := range waiters {
		go func() {
			k, err := sem.Acquire(ctx, name, dblock.Fair())
			if err != nil {
				t.Error(err)
				got <- -1
				return
			}
			got <- i
			_ = k.Release(ctx)
		}()
		waitFor(t, func() bool { return mem.Waiting(name) == i+1 })
	}
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if k, err := sem.TryAcquire(ctx, name, dblock.Fair()); err == nil {
		_ = k.Release(ctx)
		// Only if every fair waiter has been served already.
		if len(got) < waiters {
			t.Error("a fair TryAcquire passed queued fair waiters")
		}
	}
	for want := range waiters {
		select {
		case i := <-got:
			if i != want {
				t.Fatalf("fair waiter %d served as number %d", i, want)
			}
		case <-time.After(time.Minute):
			t.Fatal("fair waiters not served within a minute")
		}
	}
}
