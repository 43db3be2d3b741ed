package rowlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// writerRowOf and readerRowOf are the lock rows of a read/write lock.
func writerRowOf(name string) string { return name + "␟w" }

func readerRowOf(name string, i int) string { return fmt.Sprintf("%s␟r%d", name, i) }

// rwHold asserts that k is a read/write hold of the kind wanted.
func rwHold(t testing.TB, k dblock.Lock, exclusive bool) *rowlock.RWLock {
	t.Helper()
	h, ok := k.(*rowlock.RWLock)
	if !ok || h.Exclusive() != exclusive {
		t.Fatalf("hold %T exclusive=%v, want an *RWLock exclusive=%v", k, ok && h.Exclusive(), exclusive)
	}
	return h
}

func TestRWLock(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			a, b := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)

			// Readers share.
			r1, err := a.Readers().TryAcquire(ctx, name, dblock.Note("reporting"))
			if err != nil {
				t.Fatal(err)
			}
			r2, err := b.Readers().TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("a second reader: %v", err)
			}
			h1, h2 := rwHold(t, r1, false), rwHold(t, r2, false)
			if h1.Name() != name || h1.Token() != h2.Token() || h1.Err() != nil {
				t.Fatalf("readers: name %q tokens %d and %d (want equal: no writer between) err %v", h1.Name(), h1.Token(), h2.Token(), h1.Err())
			}
			// A writer waits for them, and gives the writer row back when
			// it does not wait.
			for _, l := range []*rowlock.Locker{a, b} {
				if _, err := l.Writers().TryAcquire(dblock.WithOwner(ctx, "writer"), name); !errors.Is(err, dblock.ErrNotAcquired) {
					t.Fatalf("writer while read: %v, want ErrNotAcquired", err)
				}
				if held := liveRowsOf(t, tg, "writer"); len(held) != 0 {
					t.Fatalf("the writer that did not wait still holds %q", held)
				}
			}
			release(t, r1)
			release(t, r2)

			w, err := b.Writers().TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("writer once the readers left: %v", err)
			}
			hw := rwHold(t, w, true)
			if hw.Token() <= h1.Token() {
				t.Fatalf("writer's token %d not above the readers' %d", hw.Token(), h1.Token())
			}
			if row := readRow(t, tg, writerRowOf(name)); row.ownerID != hw.Owner().ID || row.token != hw.Token() {
				t.Fatalf("writer row = %+v, want held by %s with token %d", row, hw.Owner().ID, hw.Token())
			}
			for _, side := range []dblock.Locker{a.Readers(), a.Writers(), b.Readers(), b.Writers()} {
				if _, err := side.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
					t.Fatalf("another owner while written: %v, want ErrNotAcquired", err)
				}
			}
			// The names are their own: the plain lock of the same name is
			// free.
			plain, err := a.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("the plain lock of a read/write lock's name: %v", err)
			}
			release(t, plain)
			release(t, w)
			if !errors.Is(w.Err(), dblock.ErrReleased) {
				t.Fatalf("writer's Err after release: %v", w.Err())
			}

			r3, err := a.Readers().TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("reader after the writer: %v", err)
			}
			if r3.Token() != hw.Token() {
				t.Fatalf("reader after the writer has token %d, want the writer's %d", r3.Token(), hw.Token())
			}
			release(t, r3)
			if err := r3.Release(ctx); !errors.Is(err, dblock.ErrNotHeld) {
				t.Fatalf("second Release = %v, want ErrNotHeld", err)
			}
		})
	}
}

// TestRWLockWriterNotStarved: once a writer waits, new readers wait behind
// it; it gets the lock when the readers in place have left, and the
// readers that came after it read after it.
func TestRWLockWriterNotStarved(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			a, b := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)
			r1, err := a.Readers().Acquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			writer := make(chan acquired, 1)
			go func() {
				k, err := b.Writers().Acquire(dblock.WithOwner(ctx, "writer"), name)
				writer <- acquired{k, err}
			}()
			eventually(t, ctx, "the writer takes the writer row", func() bool {
				return slices.Contains(liveRowsOf(t, tg, "writer"), writerRowOf(name))
			})
			if _, err := a.Readers().TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("a new reader while a writer waits: %v, want ErrNotAcquired", err)
			}
			if held := liveRowsOf(t, tg, "late-reader"); len(held) != 0 {
				t.Fatalf("before the late reader: %q", held)
			}
			late := make(chan acquired, 1)
			go func() {
				k, err := a.Readers().Acquire(dblock.WithOwner(ctx, "late-reader"), name)
				late <- acquired{k, err}
			}()
			select {
			case r := <-writer:
				t.Fatalf("the writer got the lock while a reader held it: %v", r.err)
			default:
			}
			release(t, r1)
			w := <-writer
			if w.err != nil {
				t.Fatalf("writer after the reader left: %v", w.err)
			}
			if w.lock.Token() <= r1.Token() {
				t.Fatalf("writer's token %d not above the reader's %d", w.lock.Token(), r1.Token())
			}
			select {
			case r := <-late:
				t.Fatalf("the late reader read while the writer held the lock: %v", r.err)
			default:
			}
			release(t, w.lock)
			r := <-late
			if r.err != nil {
				t.Fatalf("the late reader after the writer: %v", r.err)
			}
			if r.lock.Token() != w.lock.Token() {
				t.Fatalf("late reader's token %d, want the writer's %d", r.lock.Token(), w.lock.Token())
			}
			release(t, r.lock)
		})
	}
}

// TestRWLockReentrancy: a writer may read and write again; a reader may
// read again, even while a writer waits for it; a reader that asks to
// write gets ErrUpgrade at once.
func TestRWLockReentrancy(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			l, other := newLocker(t, tg.DB), newLocker(t, tg.DB)

			t.Run("writer reads", func(t *testing.T) {
				name := testdb.Name(t)
				w, err := l.Writers().Acquire(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				r, err := other.Readers().TryAcquire(w.Context(), name)
				if err != nil {
					t.Fatalf("reading under the write lock: %v", err)
				}
				rwHold(t, r, false)
				again, err := other.Writers().TryAcquire(w.Context(), name)
				if err != nil {
					t.Fatalf("writing again: %v", err)
				}
				if r.Token() != w.Token() || again.Token() != w.Token() {
					t.Fatalf("tokens under the write lock: read %d, write %d, want %d", r.Token(), again.Token(), w.Token())
				}
				if got := readRow(t, tg, writerRowOf(name)).holdCount; got != 3 {
					t.Fatalf("writer row hold count %d, want 3", got)
				}
				release(t, again)
				release(t, w)
				// The read taken under the write keeps the writer row.
				if _, err := other.Readers().TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
					t.Fatalf("another reader while the read under write is held: %v", err)
				}
				release(t, r)
				k, err := other.Readers().TryAcquire(ctx, name)
				if err != nil {
					t.Fatalf("another reader once all is released: %v", err)
				}
				release(t, k)
			})

			t.Run("reader reads again while a writer waits", func(t *testing.T) {
				name := testdb.Name(t)
				// A writer first, so that the writer row exists and a
				// takeover adds exactly one to its token.
				first, err := l.Writers().Acquire(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				release(t, first)
				r, err := l.Readers().Acquire(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				writer := make(chan acquired, 1)
				go func() {
					k, err := other.Writers().Acquire(dblock.WithOwner(ctx, "waiting-writer"), name)
					writer <- acquired{k, err}
				}()
				eventually(t, ctx, "the writer takes the writer row", func() bool {
					return slices.Contains(liveRowsOf(t, tg, "waiting-writer"), writerRowOf(name))
				})
				inner, err := l.Readers().TryAcquire(r.Context(), name)
				if err != nil {
					t.Fatalf("re-entering the read while a writer waits: %v", err)
				}
				// By owner id alone (no token in the context), from another
				// Locker of the process: the token before the writer's.
				byOwner, err := other.Readers().TryAcquire(dblock.WithOwner(ctx, r.Owner().ID), name)
				if err != nil {
					t.Fatalf("re-entering the read by owner id while a writer waits: %v", err)
				}
				if inner.Token() != r.Token() || byOwner.Token() != r.Token() || r.Token() != first.Token() {
					t.Fatalf("re-entered read tokens %d and %d, want the outer read's %d, the last writer's %d",
						inner.Token(), byOwner.Token(), r.Token(), first.Token())
				}
				if got := readRow(t, tg, readerRowOf(name, readerSlotOf(t, tg, name))).holdCount; got != 3 {
					t.Fatalf("reader row hold count %d, want 3", got)
				}
				release(t, byOwner)
				release(t, inner)
				select {
				case w := <-writer:
					t.Fatalf("the writer got the lock while the outer read was held: %v", w.err)
				default:
				}
				release(t, r)
				w := <-writer
				if w.err != nil {
					t.Fatal(w.err)
				}
				if w.lock.Token() <= r.Token() {
					t.Fatalf("writer's token %d not above the reader's %d", w.lock.Token(), r.Token())
				}
				release(t, w.lock)
			})

			t.Run("reader asks to write", func(t *testing.T) {
				name := testdb.Name(t)
				r, err := l.Readers().Acquire(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				for _, try := range []func(context.Context, string, ...dblock.Option) (dblock.Lock, error){
					l.Writers().Acquire, other.Writers().TryAcquire,
				} {
					if k, err := try(r.Context(), name); !errors.Is(err, dblock.ErrUpgrade) || k != nil {
						t.Fatalf("upgrade = (%v, %v), want ErrUpgrade", k, err)
					}
				}
				if row := readRow(t, tg, writerRowOf(name)); row.holdCount != 0 {
					t.Fatalf("the refused upgrade left the writer row held: %+v", row)
				}
				if r.Err() != nil {
					t.Fatalf("the read after a refused upgrade: %v", r.Err())
				}
				k, err := other.Readers().TryAcquire(ctx, name)
				if err != nil {
					t.Fatalf("another reader after a refused upgrade: %v", err)
				}
				release(t, k)
				release(t, r)
				w, err := l.Writers().TryAcquire(dblock.WithOwner(ctx, r.Owner().ID), name)
				if err != nil {
					t.Fatalf("the same owner writing once its read is released: %v", err)
				}
				release(t, w)
			})
		})
	}
}

func TestRWLockBadInput(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			closed := newLocker(t, tg.DB)
			_ = closed.Close()
			good := testdb.Name(t)
			canceled, cancel := context.WithCancel(ctx)
			cancel()
			long := strings.Repeat("n", dblock.MaxNameLength-5) // fits a plain lock, not "␟r63"
			cases := []struct {
				name string
				side func(*rowlock.Locker) dblock.Locker
				l    *rowlock.Locker
				ctx  context.Context
				lock string
				opts []dblock.Option
				want error
			}{
				{"nil context", (*rowlock.Locker).Readers, l, nil, good, nil, dblock.ErrInvalidOption},
				{"empty name", (*rowlock.Locker).Writers, l, ctx, "", nil, dblock.ErrInvalidName},
				{"name too long for its rows", (*rowlock.Locker).Readers, l, ctx, long, nil, dblock.ErrInvalidName},
				{"name too long for its rows", (*rowlock.Locker).Writers, l, ctx, long, nil, dblock.ErrInvalidName},
				{"Fair reader", (*rowlock.Locker).Readers, l, ctx, good, []dblock.Option{dblock.Fair()}, dblock.ErrInvalidOption},
				{"zero TTL", (*rowlock.Locker).Writers, l, ctx, good, []dblock.Option{dblock.TTL(0)}, dblock.ErrInvalidOption},
				{"nil option", (*rowlock.Locker).Readers, l, ctx, good, []dblock.Option{nil}, dblock.ErrInvalidOption},
				{"empty owner id", (*rowlock.Locker).Writers, l, dblock.WithOwner(ctx, ""), good, nil, dblock.ErrInvalidOption},
				{"canceled context", (*rowlock.Locker).Readers, l, canceled, good, nil, dblock.ErrNotAcquired},
				{"canceled context", (*rowlock.Locker).Writers, l, canceled, good, nil, dblock.ErrNotAcquired},
				{"closed Locker", (*rowlock.Locker).Writers, closed, ctx, good, nil, dblock.ErrClosed},
			}
			for _, c := range cases {
				side := c.side(c.l)
				for _, try := range []struct {
					how string
					fn  func(context.Context, string, ...dblock.Option) (dblock.Lock, error)
				}{{"TryAcquire", side.TryAcquire}, {"Acquire", side.Acquire}} {
					k, err := try.fn(c.ctx, c.lock, c.opts...)
					if !errors.Is(err, c.want) || k != nil {
						t.Errorf("%s: %s = (%v, %v), want %v", c.name, try.how, k, err, c.want)
					}
				}
			}
			for _, row := range []string{writerRowOf(good), readerRowOf(good, 0)} {
				if r := readRow(t, tg, row); r.exists {
					t.Fatalf("bad input wrote %q: %+v", row, r)
				}
			}
			// Writers may queue fairly.
			w, err := l.Writers().TryAcquire(ctx, good, dblock.Fair())
			if err != nil {
				t.Fatalf("a fair writer: %v", err)
			}
			release(t, w)
		})
	}
}

// TestRWLockDo: both sides are dblock.Lockers.
func TestRWLockDo(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			name := testdb.Name(t)
			err := dblock.Do(ctx, l.Readers(), name, func(context.Context) error {
				return dblock.Do(ctx, l.Readers(), name, func(context.Context) error {
					if _, err := l.Writers().TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
						return fmt.Errorf("a writer under two readers: %v", err)
					}
					return nil
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := dblock.Do(ctx, l.Writers(), name, func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRWLockHammer: goroutines of two Lockers read (mostly) and write one
// name, waiting, trying, or giving up after a short wait. The ledger
// checks that a writer never has company, reader or writer; that a
// writer's token is above every token handed out before it; that a
// reader's token is at least every writer's before it; and that owners
// whose acquisition failed are left holding nothing.
func TestRWLockHammer(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // liveness bound
			defer cancel()
			lockers := []*rowlock.Locker{newLocker(t, tg.DB), newLocker(t, tg.DB)}
			name := testdb.Name(t)
			lg := newLedger(t)
			const workers, rounds = 8, 25
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					l := lockers[w%len(lockers)]
					for round := range rounds {
						if ctx.Err() != nil || lg.broken() {
							return
						}
						rwRound(t, ctx, tg, l, lg, name, fmt.Sprintf("w%d-r%d", w, round), rand.IntN(10) < 3, round%4)
					}
				})
			}
			wg.Wait()
			if ctx.Err() != nil {
				t.Fatalf("the hammer did not finish: %v", ctx.Err())
			}
			t.Logf("%d writes, %d reads", lg.holders["writes"], lg.holders["reads"])
			if lg.holders["writes"] == 0 || lg.holders["reads"] == 0 {
				t.Fatalf("the hammer did not mix reads and writes")
			}
			checkNothingLeft(t, tg, lg)
		})
	}
}

// rwRound is one worker's turn in TestRWLockHammer: mode 0 gives up after
// a short wait, 1 tries without waiting, the others wait.
func rwRound(t *testing.T, ctx context.Context, tg testdb.Target, l *rowlock.Locker, lg *ledger, name, owner string, write bool, mode int) {
	side := l.Readers()
	if write {
		side = l.Writers()
	}
	octx := dblock.WithOwner(ctx, owner)
	opts := []dblock.Option{dblock.TTL(5 * time.Second)}
	var k dblock.Lock
	var err error
	var deadline time.Time
	switch mode {
	case 0:
		short, cancel := context.WithTimeout(octx, time.Duration(1+rand.IntN(30))*time.Millisecond)
		deadline, _ = short.Deadline()
		k, err = side.Acquire(short, name, opts...)
		cancel()
	case 1:
		k, err = side.TryAcquire(octx, name, opts...)
	default:
		k, err = side.Acquire(octx, name, opts...)
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, dblock.ErrNotAcquired) && (deadline.IsZero() || time.Now().Before(deadline)) {
			t.Errorf("owner %s: %v", owner, err)
			return
		}
		lg.failed(owner, len(liveRowsOf(t, tg, owner)))
		return
	}
	const readers, writers, maxToken, writerToken = "readers", "writers", "max token", "writer token"
	lg.mu.Lock()
	if write {
		lg.holders["writes"]++
		lg.holders[writers]++
		if lg.holders[writers] != 1 || lg.holders[readers] != 0 {
			lg.errorf("a writer with %d writers and %d readers", lg.holders[writers], lg.holders[readers])
		}
		if k.Token() <= lg.lastToken[maxToken] {
			lg.errorf("writer's token %d not above %d, handed out before it", k.Token(), lg.lastToken[maxToken])
		}
		lg.lastToken[writerToken] = k.Token()
	} else {
		lg.holders["reads"]++
		lg.holders[readers]++
		if lg.holders[writers] != 0 {
			lg.errorf("a reader with %d writers", lg.holders[writers])
		}
		if k.Token() < lg.lastToken[writerToken] {
			lg.errorf("reader's token %d below the last writer's %d", k.Token(), lg.lastToken[writerToken])
		}
	}
	lg.lastToken[maxToken] = max(lg.lastToken[maxToken], k.Token())
	lg.mu.Unlock()
	time.Sleep(time.Duration(rand.IntN(4)) * time.Millisecond)
	lg.mu.Lock()
	if write {
		lg.holders[writers]--
	} else {
		lg.holders[readers]--
	}
	lg.mu.Unlock()
	if err := k.Release(context.WithoutCancel(ctx)); err != nil {
		t.Errorf("owner %s: Release: %v", owner, err)
	}
}

// TestChildRWHolder is the body of the child process of
// TestKilledRWHolderPassedOver; in a normal run it returns at once. It
// takes the read or write lock (SQLLOCK_CHILD_SIDE) of SQLLOCK_CHILD_LOCK
// with the default TTL and crash grace, says "held", and waits to be
// killed.
func TestChildRWHolder(t *testing.T) {
	if !testdb.IsChild() {
		return
	}
	name, dialect := os.Getenv("SQLLOCK_CHILD_LOCK"), os.Getenv("SQLLOCK_CHILD_DIALECT")
	for _, tg := range testdb.Targets(t) {
		if tg.Name != dialect {
			continue
		}
		l, err := rowlock.New(tg.DB)
		if err != nil {
			t.Fatal(err)
		}
		side := l.Readers()
		if os.Getenv("SQLLOCK_CHILD_SIDE") == "write" {
			side = l.Writers()
		}
		if _, err := side.Acquire(context.Background(), name); err != nil {
			t.Fatal(err)
		}
		fmt.Println("held")
		select {} // until killed
	}
}

// TestKilledRWHolderPassedOver: SIGKILL a writer, or a reader, whose lease
// has 30 seconds to run; a reader, or a writer, in another process gets
// the lock long before, once the dead holder's session marker is gone
// (see crash_test.go).
func TestKilledRWHolderPassedOver(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		for _, c := range []struct{ dead, waiter string }{{"write", "read"}, {"read", "write"}} {
			t.Run(tg.Name+"/"+c.dead+" killed", func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
				defer cancel()
				name := testdb.Name(t)
				child := testdb.Child(t, "TestChildRWHolder", "SQLLOCK_CHILD_LOCK="+name,
					"SQLLOCK_CHILD_DIALECT="+tg.Name, "SQLLOCK_CHILD_SIDE="+c.dead)
				if _, err := child.WaitLine(ctx, "held"); err != nil {
					t.Fatalf("child did not report holding the lock: %v", err)
				}
				deadRow := writerRowOf(name)
				if c.dead == "read" {
					deadRow = readerRowOf(name, readerSlotOf(t, tg, name))
				}
				leaseEnd := expiresAtMicros(t, tg, deadRow)
				l := newLocker(t, tg.DB)
				side := l.Readers()
				if c.waiter == "write" {
					side = l.Writers()
				}
				got := make(chan acquired, 1)
				go func() {
					k, err := side.Acquire(ctx, name)
					got <- acquired{k, err}
				}()
				killedAt := dbNowMicros(t, tg)
				child.Kill()
				r := <-got
				if r.err != nil {
					t.Fatalf("%s after the %s holder was killed: %v", c.waiter, c.dead, r.err)
				}
				defer release(t, r.lock)
				now := dbNowMicros(t, tg)
				t.Logf("%s lock taken by %v after SIGKILL (database clock)", c.waiter, time.Duration(now-killedAt)*time.Microsecond)
				if now >= leaseEnd {
					t.Fatalf("taken at the dead holder's lease end or after: its lease was not cut short")
				}
			})
		}
	}
}

// readerSlotOf is the reader row the only reader of name holds.
func readerSlotOf(t testing.TB, tg testdb.Target, name string) int {
	t.Helper()
	for i := range rowlock.MaxReaders {
		if readRow(t, tg, readerRowOf(name, i)).holdCount > 0 {
			return i
		}
	}
	t.Fatalf("no reader row of %q is held", name)
	return -1
}
