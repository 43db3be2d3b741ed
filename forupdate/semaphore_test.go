package forupdate_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/dblocktest"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/testdb"
)

// semaphore returns l's semaphores of limit permits.
func semaphore(t testing.TB, l *forupdate.Locker, limit int) dblock.Semaphore {
	t.Helper()
	s, err := l.Semaphore(limit)
	if err != nil {
		t.Fatalf("Semaphore(%d): %v", limit, err)
	}
	return s
}

// tryPermit takes a permit of name for the owner in ctx (a fresh one if
// none).
func tryPermit(ctx context.Context, s dblock.Semaphore, name string) (*forupdate.Permit, error) {
	return tryAs[*forupdate.Permit](ctx, s, name)
}

// TestSemaphoreLimit: a semaphore of limit 3 admits three holders at once,
// on three slots with distinct tokens, and a fourth only once one leaves,
// taking the slot that was freed, with a token above the leaver's.
func TestSemaphoreLimit(t *testing.T) {
	for _, src := range tokenSources(t) {
		t.Run(src.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := semaphore(t, src.locker(t, src.target.DB), 3)
			name := testdb.Name(t)
			var held []*forupdate.Permit
			slots, tokens := map[int]bool{}, map[int64]bool{}
			for i := range 3 {
				p, err := tryPermit(ctx, s, name)
				if err != nil {
					t.Fatalf("permit %d: %v", i, err)
				}
				if p.Name() != name {
					t.Errorf("Name() = %q, want %q", p.Name(), name)
				}
				if slots[p.Slot()] || p.Slot() < 0 || p.Slot() >= 3 {
					t.Errorf("permit %d on slot %d; slots taken: %v", i, p.Slot(), slots)
				}
				if tokens[p.Token()] {
					t.Errorf("permit %d has token %d, already handed out", i, p.Token())
				}
				slots[p.Slot()], tokens[p.Token()] = true, true
				held = append(held, p)
			}
			if _, err := tryPermit(ctx, s, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("fourth TryAcquire at the limit: %v, want ErrNotAcquired", err)
			}
			leaver := held[1]
			release(t, leaver)
			p, err := tryPermit(ctx, s, name)
			if err != nil {
				t.Fatalf("TryAcquire after a release: %v", err)
			}
			if p.Slot() != leaver.Slot() {
				t.Errorf("took slot %d, the free one is %d", p.Slot(), leaver.Slot())
			}
			if p.Token() <= leaver.Token() {
				t.Errorf("token %d after the slot's previous holder's %d", p.Token(), leaver.Token())
			}
			held[1] = p
			for _, p := range held {
				release(t, p)
			}
		})
	}
}

// TestSemaphoreWaits: Acquire at the limit waits in the database and gets
// the permit once a holder leaves; canceled, it returns ErrNotAcquired with
// the context's error and leaves its session idle, with no transaction.
func TestSemaphoreWaits(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			s := semaphore(t, newLocker(t, tg.DB), 2)
			a, err := tryPermit(ctx, s, name)
			if err != nil {
				t.Fatal(err)
			}
			b, err := tryPermit(ctx, s, name)
			if err != nil {
				t.Fatal(err)
			}

			waiterDB := twoConnDB(t, tg)
			session := sessionID(t, tg, waiterDB)
			ws := semaphore(t, newLocker(t, waiterDB), 2)
			got := make(chan error, 1)
			var p dblock.Lock
			go func() {
				var err error
				p, err = ws.Acquire(ctx, name)
				got <- err
			}()
			waitForState(t, tg, session, "waiting")
			select {
			case err := <-got:
				t.Fatalf("Acquire returned while both permits were held: %v", err)
			default:
			}
			release(t, a)
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("Acquire after a release: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Acquire did not return after a release")
			}
			if p.Token() <= a.Token() {
				t.Errorf("waiter's token %d, not above the leaver's %d", p.Token(), a.Token())
			}

			// Both held again: a canceled waiter returns clean.
			cancelDB := twoConnDB(t, tg)
			session = sessionID(t, tg, cancelDB)
			cs := semaphore(t, newLocker(t, cancelDB), 2)
			cctx, cancel := context.WithCancel(ctx)
			go func() {
				_, err := cs.Acquire(cctx, name)
				got <- err
			}()
			waitForState(t, tg, session, "waiting")
			cancel()
			select {
			case err := <-got:
				if !errors.Is(err, dblock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
					t.Fatalf("canceled Acquire: %v, want ErrNotAcquired and context.Canceled", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("canceled Acquire did not return")
			}
			forupdate.WaitRestored(forupdate.SemaphoreLocker(cs))
			waitForState(t, tg, session, "idle")
			release(t, p)
			release(t, b)
		})
	}
}

// TestSemaphoreLimitMismatch: asking with another limit while a permit is
// held or awaited is ErrLimitMismatch, at once, for TryAcquire and
// Acquire, and for the owner of a permit re-entering with another limit;
// with no one holding a permit the limit changes.
func TestSemaphoreLimitMismatch(t *testing.T) {
	for _, src := range tokenSources(t) {
		t.Run(src.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			l := src.locker(t, src.target.DB)
			name := testdb.Name(t)
			two, three := semaphore(t, l, 2), semaphore(t, l, 3)
			p, err := tryPermit(ctx, two, name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := three.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrLimitMismatch) {
				t.Errorf("TryAcquire with limit 3 while 2 is in use: %v, want ErrLimitMismatch", err)
			}
			if _, err := three.Acquire(ctx, name); !errors.Is(err, dblock.ErrLimitMismatch) {
				t.Errorf("Acquire with limit 3 while 2 is in use: %v, want ErrLimitMismatch", err)
			}
			if _, err := three.Acquire(p.Context(), name); !errors.Is(err, dblock.ErrLimitMismatch) {
				t.Errorf("re-entering with limit 3 a permit of limit 2: %v, want ErrLimitMismatch", err)
			}
			release(t, p)
			q, err := tryPermit(ctx, three, name)
			if err != nil {
				t.Fatalf("limit 3 once no one holds a permit: %v", err)
			}
			if _, err := two.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrLimitMismatch) {
				t.Errorf("limit 2 after the change to 3, while held: %v, want ErrLimitMismatch", err)
			}
			release(t, q)
		})
	}
}

// TestSemaphoreReentry: the owner of a permit re-enters it: same slot,
// token and transaction, and the slot stays held until the last release.
func TestSemaphoreReentry(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			s := semaphore(t, newLocker(t, tg.DB), 1)
			p, err := tryPermit(ctx, s, name)
			if err != nil {
				t.Fatal(err)
			}
			k, err := s.Acquire(p.Context(), name)
			if err != nil {
				t.Fatalf("re-entry: %v", err)
			}
			inner := k.(*forupdate.Permit)
			if inner.Slot() != p.Slot() || inner.Token() != p.Token() || inner.Tx() != p.Tx() {
				t.Errorf("re-entry got slot %d token %d, want the permit's %d, %d and its Tx", inner.Slot(), inner.Token(), p.Slot(), p.Token())
			}
			release(t, inner)
			other := semaphore(t, newLocker(t, tg.DB), 1)
			if _, err := other.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Errorf("TryAcquire while the outer hold remains: %v, want ErrNotAcquired", err)
			}
			release(t, p)
		})
	}
}

// TestSemaphoreNeverOverLimit: many contenders, through two Lockers, never
// hold more than the limit at once, and every slot's tokens grow.
func TestSemaphoreNeverOverLimit(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			hammerSemaphore(t, tg, 2, 5, 4)
		})
	}
}

// hammerSemaphore has workers goroutines, through two Lockers on tg, each
// take and release a permit of a semaphore of limit rounds times, waiting
// for it, and checks that no more than limit hold one at once and that
// every slot's tokens grow.
func hammerSemaphore(t *testing.T, tg testdb.Target, limit, workers, rounds int) {
	ctx := t.Context()
	name := testdb.Name(t)
	sems := []dblock.Semaphore{semaphore(t, newLocker(t, tg.DB), limit), semaphore(t, newLocker(t, tg.DB), limit)}
	var inside atomic.Int32
	var mu sync.Mutex
	last := map[int]int64{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for range rounds {
				k, err := sems[w%2].Acquire(ctx, name)
				if err != nil {
					errs <- err
					return
				}
				p := k.(*forupdate.Permit)
				if n := inside.Add(1); int(n) > limit {
					errs <- fmt.Errorf("%d holders at once", n)
				}
				mu.Lock()
				if p.Token() <= last[p.Slot()] {
					errs <- fmt.Errorf("slot %d: token %d after %d", p.Slot(), p.Token(), last[p.Slot()])
				}
				last[p.Slot()] = p.Token()
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
				inside.Add(-1)
				if err := p.Release(ctx); err != nil {
					errs <- err
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
}

// TestSemaphoreInput: bad limits and names are refused with typed errors.
func TestSemaphoreInput(t *testing.T) {
	tg := targets(t)[0]
	l := newLocker(t, tg.DB)
	for _, limit := range []int{0, -1, forupdate.MaxSemaphoreLimit + 1} {
		if _, err := l.Semaphore(limit); !errors.Is(err, dblock.ErrInvalidOption) {
			t.Errorf("Semaphore(%d): %v, want ErrInvalidOption", limit, err)
		}
	}
	s := semaphore(t, l, 10)
	for _, name := range []string{"", strings.Repeat("n", dblock.MaxNameLength)} {
		if _, err := s.TryAcquire(t.Context(), name); !errors.Is(err, dblock.ErrInvalidName) {
			t.Errorf("TryAcquire(%d bytes): %v, want ErrInvalidName", len(name), err)
		}
		if _, err := l.Readers().TryAcquire(t.Context(), name); !errors.Is(err, dblock.ErrInvalidName) {
			t.Errorf("Readers().TryAcquire(%d bytes): %v, want ErrInvalidName", len(name), err)
		}
	}
	// Refused without I/O, as by Locker: cronguard asks before it runs.
	for _, checker := range []dblock.Locker{s, l.Readers(), l.Writers()} {
		for _, opt := range []dblock.Option{dblock.Fair(), dblock.MinHold(time.Second)} {
			if err := lockkit.CheckOptions(checker, opt); !errors.Is(err, dblock.ErrInvalidOption) {
				t.Errorf("lockkit.CheckOptions(%T): %v, want ErrInvalidOption", checker, err)
			}
			if _, err := checker.TryAcquire(t.Context(), "x", opt); !errors.Is(err, dblock.ErrInvalidOption) {
				t.Errorf("%T.TryAcquire: %v, want ErrInvalidOption", checker, err)
			}
		}
	}
}

// TestSemaphoreConformance runs dblock's conformance suite on a semaphore
// of one permit, which is a mutex.
func TestSemaphoreConformance(t *testing.T) {
	for _, src := range tokenSources(t) {
		t.Run(src.name, func(t *testing.T) {
			dblocktest.TestLocker(t, dblocktest.Harness{
				New:  func(t *testing.T) dblock.Locker { return semaphore(t, src.locker(t, src.target.DB), 1) },
				Lose: func(t *testing.T, k dblock.Lock) { killSession(t, src.target, k.(*forupdate.Permit).Lock) },
			})
		})
	}
}

// TestChildPermitHolder is the body of the child process of
// TestKilledPermitHolderFreesSlotAtOnce; in a normal run it returns at
// once. It takes both permits of a semaphore of two and reports their
// tokens.
func TestChildPermitHolder(t *testing.T) {
	if !testdb.IsChild() {
		return
	}
	name, dialect := os.Getenv("SQLLOCK_CHILD_LOCK"), os.Getenv("SQLLOCK_CHILD_DIALECT")
	for _, tg := range targets(t) {
		if tg.Name != dialect {
			continue
		}
		s := semaphore(t, newLocker(t, tg.DB), 2)
		var tokens []string
		for range 2 {
			k, err := s.Acquire(context.Background(), name, dblock.TTL(childTTL))
			if err != nil {
				t.Fatal(err)
			}
			tokens = append(tokens, strconv.FormatInt(k.Token(), 10))
		}
		fmt.Printf("held %s\n", strings.Join(tokens, " "))
		select {}
	}
}

// TestKilledPermitHolderFreesSlotAtOnce: a waiter for a semaphore whose
// permits a process holds gets one as soon as that process is killed,
// long before any server timeout (the child's TTL is an hour).
func TestKilledPermitHolderFreesSlotAtOnce(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			child := testdb.Child(t, "TestChildPermitHolder", "SQLLOCK_CHILD_LOCK="+name, "SQLLOCK_CHILD_DIALECT="+tg.Name)
			waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			line, err := child.WaitLine(waitCtx, "held ")
			if err != nil {
				t.Fatalf("child did not report holding its permits: %v", err)
			}
			var t1, t2 int64
			if _, err := fmt.Sscanf(line, "held %d %d", &t1, &t2); err != nil {
				t.Fatalf("child said %q: %v", line, err)
			}
			s := semaphore(t, newLocker(t, tg.DB), 2)
			if _, err := s.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("TryAcquire while the child holds both permits: %v", err)
			}
			waiterDB := twoConnDB(t, tg)
			session := sessionID(t, tg, waiterDB)
			got := make(chan error, 1)
			var p dblock.Lock
			go func() {
				var err error
				p, err = semaphore(t, newLocker(t, waiterDB), 2).Acquire(ctx, name)
				got <- err
			}()
			waitForState(t, tg, session, "waiting")
			child.Kill()
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("Acquire after the holder was killed: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Acquire did not return after the holder was killed")
			}
			if p.Token() <= max(t1, t2) {
				t.Errorf("token %d after the dead holder's %d and %d", p.Token(), t1, t2)
			}
			release(t, p)
		})
	}
}
