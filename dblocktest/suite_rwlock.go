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

// rwRules checks the read/write rules. Readers share a name and exclude
// writers; writers exclude both. A reader asking to write gets
// dblock.ErrUpgrade at once. A writer may read. Readers refuse
// dblock.Fair. With Harness.WritersFirst, once a writer waits, new readers
// wait behind it, and a reader already in may read again. A writer's token
// is above every earlier token. A reader's is at least the last writer's:
// rowlock's is the last writer's, and forupdate's readers draw their own
// on some databases.
func (s *suite) rwRules(t *testing.T) {
	t.Run("readers share, writers exclude", s.rwShare)
	t.Run("upgrade refused", s.rwUpgrade)
	t.Run("writer may read", s.rwWriterReads)
	if s.h.WritersFirst {
		t.Run("writers are not starved", s.rwNoStarve)
	} else {
		t.Log("dblocktest: writers first not tested: Harness.WritersFirst is not set")
	}
	t.Run("exclusion under concurrency", s.rwExclusion)
	t.Run("readers refuse Fair", func(t *testing.T) {
		readers, _ := s.sides(t)
		name := lockName(t)
		k, err := readers.TryAcquire(bounded(t), name, dblock.Fair())
		if err == nil {
			releaseAtEnd(t, k)
		}
		if !errors.Is(err, dblock.ErrInvalidOption) {
			t.Errorf("reader's TryAcquire with Fair = %v, want dblock.ErrInvalidOption", err)
		}
	})
}

func (s *suite) rwShare(t *testing.T) {
	ctx := bounded(t)
	ra, wa := s.sides(t)
	rb, wb := s.sides(t)
	name := lockName(t)

	w0 := hold(t, wa, ctx, name)
	refused(t, rb, ctx, name, "reader while a writer holds")
	refused(t, wb, ctx, name, "writer while a writer holds")
	release(t, w0)

	r1, r2 := hold(t, ra, ctx, name), hold(t, rb, ctx, name)
	for _, r := range []dblock.Lock{r1, r2} {
		if r.Name() != name {
			t.Errorf("Name() = %q, want %q", r.Name(), name)
		}
		if r.Token() < w0.Token() {
			t.Errorf("reader's token %d, want at least the last writer's %d", r.Token(), w0.Token())
		}
	}
	refused(t, wa, ctx, name, "writer while two readers hold")
	refused(t, wb, ctx, name, "writer while two readers hold, another Locker")
	release(t, r1)
	refused(t, wb, ctx, name, "writer while one reader holds")
	release(t, r2)

	w := hold(t, wb, ctx, name)
	if w.Token() <= max(w0.Token(), r1.Token(), r2.Token()) {
		t.Errorf("writer's token %d, want more than the previous writer's %d and readers' %d, %d", w.Token(), w0.Token(), r1.Token(), r2.Token())
	}
	refused(t, ra, ctx, name, "reader while a writer holds")
	waiter := acquireAsync(t, ra, ctx, name)
	release(t, w)
	r := await(t, waiter)
	if r.err != nil {
		t.Fatalf("waiting reader after the writer's Release = %v", r.err)
	}
	if r.lock.Token() < w.Token() {
		t.Errorf("reader's token %d, want at least the last writer's %d", r.lock.Token(), w.Token())
	}
	release(t, r.lock)
}

func (s *suite) rwUpgrade(t *testing.T) {
	ctx := bounded(t)
	readers, writers := s.sides(t)
	_, other := s.sides(t)
	name := lockName(t)
	r := hold(t, readers, ctx, name)
	for _, call := range []struct {
		how  string
		take func(context.Context, string, ...dblock.Option) (dblock.Lock, error)
	}{{"TryAcquire", writers.TryAcquire}, {"Acquire", writers.Acquire}} {
		// The reader's owner, in a context bounded as the suite's are (the
		// hold's Context lasts as long as the hold).
		k, err := call.take(dblock.WithOwner(ctx, r.Owner().ID), name)
		if err == nil {
			releaseAtEnd(t, k)
		}
		if !errors.Is(err, dblock.ErrUpgrade) {
			t.Errorf("writer's %s by a reader = %v, want dblock.ErrUpgrade", call.how, err)
		}
	}
	if err := r.Err(); err != nil {
		t.Fatalf("reader after its refused upgrade: Err() = %v", err)
	}
	release(t, r)
	// The refused upgrades held nothing.
	release(t, hold(t, other, ctx, name))
}

func (s *suite) rwWriterReads(t *testing.T) {
	ctx := bounded(t)
	readers, writers := s.sides(t)
	rb, _ := s.sides(t)
	name := lockName(t)
	w := hold(t, writers, ctx, name)
	r := hold(t, readers, w.Context(), name)
	if r.Token() != w.Token() {
		t.Errorf("read under the write lock: token %d, want the writer's %d", r.Token(), w.Token())
	}
	again := hold(t, writers, w.Context(), name)
	if again.Token() != w.Token() {
		t.Errorf("write re-entered: token %d, want %d", again.Token(), w.Token())
	}
	refused(t, rb, ctx, name, "another reader while the writer holds")
	release(t, w)
	release(t, again)
	refused(t, rb, ctx, name, "another reader while the writer's read holds")
	release(t, r)
	release(t, hold(t, rb, ctx, name))
}

// rwNoStarve: a writer waits for a reader; new readers are then refused,
// while the reader in place may read again; the writer gets the lock once
// the reader's holds are released.
func (s *suite) rwNoStarve(t *testing.T) {
	ctx := bounded(t)
	ra, _ := s.sides(t)
	rb, wb := s.sides(t)
	name := lockName(t)
	r := hold(t, ra, ctx, name)
	writer := acquireAsync(t, wb, ctx, name)
	// Until the writer waits, new readers get in: wait for it to, by the
	// readers' refusal (a bound against hangs, not a timing assertion).
	deadline := time.Now().Add(hangBound)
	for {
		k, err := rb.TryAcquire(ctx, name)
		if errors.Is(err, dblock.ErrNotAcquired) {
			break
		}
		if err != nil {
			t.Fatalf("new reader's TryAcquire = %v", err)
		}
		release(t, k)
		if time.Now().After(deadline) {
			t.Fatalf("new readers still admitted %v after a writer began to wait", hangBound)
		}
		time.Sleep(time.Millisecond)
	}
	again := hold(t, ra, r.Context(), name)
	select {
	case got := <-writer:
		if got.lock != nil {
			releaseAtEnd(t, got.lock)
		}
		t.Fatalf("writer returned (%v) while a reader held the lock", got.err)
	default:
	}
	release(t, r)
	release(t, again)
	got := await(t, writer)
	if got.err != nil {
		t.Fatalf("waiting writer after the readers left = %v", got.err)
	}
	if got.lock.Token() <= r.Token() {
		t.Errorf("writer's token %d, want more than the reader's %d", got.lock.Token(), r.Token())
	}
	release(t, got.lock)
}

// rwExclusion: goroutines on two Lockers read and write one name in
// turns; a writer is never inside with anyone; a writer's token is above
// every token before it, a reader's at least the last writer's.
//
// Its complexity (over 15) is every invariant checked in one place, by the
// goroutines that see it.
func (s *suite) rwExclusion(t *testing.T) {
	goroutines, rounds := 8, 5
	if testing.Short() {
		goroutines, rounds = 4, 3
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*hangBound)
	defer cancel()
	ra, wa := s.sides(t)
	rb, wb := s.sides(t)
	sides := [][2]dblock.Locker{{ra, wa}, {rb, wb}}
	name := lockName(t)
	var mu sync.Mutex
	readers, writers := 0, 0
	// lastWrite is the token of the last writer in, maxRead the largest
	// reader's token since.
	var lastWrite, maxRead int64
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			write := i%3 == 0
			l := sides[i%2][0]
			if write {
				l = sides[i%2][1]
			}
			for range rounds {
				k, err := l.Acquire(ctx, name)
				if err != nil {
					t.Errorf("goroutine %d: %v", i, err)
					return
				}
				mu.Lock()
				switch {
				case write && (readers > 0 || writers > 0):
					t.Errorf("a writer got in with %d readers and %d writers inside", readers, writers)
				case !write && writers > 0:
					t.Error("a reader got in while a writer was inside")
				case write && k.Token() <= max(lastWrite, maxRead):
					t.Errorf("writer's token %d after a writer's %d and readers' up to %d, want it larger", k.Token(), lastWrite, maxRead)
				case !write && k.Token() < lastWrite:
					// rowlock's readers get the token of the writer row
					// (the last writer's, or that of a writer that took the
					// row and left without getting in); forupdate's draw
					// their own on some databases.
					t.Errorf("reader's token %d, want at least the last writer's %d", k.Token(), lastWrite)
				}
				if write {
					writers++
					lastWrite, maxRead = k.Token(), 0
				} else {
					readers++
					maxRead = max(maxRead, k.Token())
				}
				mu.Unlock()
				runtime.Gosched()
				time.Sleep(time.Millisecond)
				mu.Lock()
				if write {
					writers--
				} else {
					readers--
				}
				mu.Unlock()
				if err := k.Release(ctx); err != nil {
					t.Errorf("goroutine %d: Release: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// sides returns the readers and writers of a new Locker's read/write
// locks (Harness.ReadWrite).
func (s *suite) sides(t *testing.T) (readers, writers dblock.Locker) {
	rw := s.h.ReadWrite(s.h.New(t))
	return rw.Readers(), rw.Writers()
}
