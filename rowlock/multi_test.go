package rowlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// names returns n lock names of the test's own, each with suffix i.
func names(t testing.TB, n int) []string {
	base := testdb.Name(t)
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s/%d", base, i)
	}
	return out
}

func TestAcquireAll(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l, other := newLocker(t, tg.DB), newLocker(t, tg.DB)
			n := names(t, 3)
			for _, acquire := range []struct {
				how string
				fn  func(context.Context, []string, ...dblock.Option) (*rowlock.MultiLock, error)
			}{{"AcquireAll", l.AcquireAll}, {"TryAcquireAll", l.TryAcquireAll}} {
				// Out of order and with a duplicate: held once each, sorted.
				m, err := acquire.fn(ctx, []string{n[2], n[0], n[2], n[1]}, dblock.Note("batch"))
				if err != nil {
					t.Fatalf("%s: %v", acquire.how, err)
				}
				if got := m.Names(); !slices.Equal(got, n) {
					t.Fatalf("%s: Names = %q, want %q", acquire.how, got, n)
				}
				if m.Name() != strings.Join(n, ",") || m.Err() != nil {
					t.Fatalf("%s: Name %q Err %v", acquire.how, m.Name(), m.Err())
				}
				tokens := m.Tokens()
				for i, name := range n {
					row := readRow(t, tg, name)
					if row.ownerID != m.Owner().ID || row.holdCount != 1 || row.token != tokens[i] || row.note != "batch" {
						t.Fatalf("%s: row of %q = %+v, want held once by %s with token %d", acquire.how, name, row, m.Owner().ID, tokens[i])
					}
					if _, err := other.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
						t.Fatalf("%s: another owner took %q: %v", acquire.how, name, err)
					}
				}
				if m.Token() != slices.Max(tokens) {
					t.Fatalf("%s: Token %d, want the largest of %v", acquire.how, m.Token(), tokens)
				}
				if err := m.Refresh(ctx); err != nil {
					t.Fatalf("%s: Refresh: %v", acquire.how, err)
				}
				release(t, m)
				for _, name := range n {
					if row := readRow(t, tg, name); row.holdCount != 0 {
						t.Fatalf("%s: row of %q after Release = %+v", acquire.how, name, row)
					}
				}
				if !errors.Is(m.Err(), dblock.ErrReleased) || !errors.Is(context.Cause(m.Context()), dblock.ErrReleased) {
					t.Fatalf("%s: after Release Err %v, cause %v", acquire.how, m.Err(), context.Cause(m.Context()))
				}
				if err := m.Release(ctx); !errors.Is(err, dblock.ErrNotHeld) {
					t.Fatalf("%s: second Release = %v, want ErrNotHeld", acquire.how, err)
				}
				if err := m.Refresh(ctx); !errors.Is(err, dblock.ErrNotHeld) {
					t.Fatalf("%s: Refresh after Release = %v, want ErrNotHeld", acquire.how, err)
				}
			}
		})
	}
}

// TestAcquireAllAllOrNothing: an acquisition that cannot take every name
// leaves none of them held, whether it gives up at once (TryAcquireAll)
// or when its context ends while it waits (AcquireAll).
func TestAcquireAllAllOrNothing(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l, other := newLocker(t, tg.DB), newLocker(t, tg.DB)
			n := names(t, 3)
			// The middle name is held: the first is taken before it is met.
			blocker, err := other.TryAcquire(ctx, n[1])
			if err != nil {
				t.Fatal(err)
			}
			owner := dblock.WithOwner(ctx, "all-or-nothing")
			_, err = l.TryAcquireAll(owner, n)
			if !errors.Is(err, dblock.ErrNotAcquired) || !strings.Contains(err.Error(), n[1]) {
				t.Fatalf("TryAcquireAll with %q held = %v, want ErrNotAcquired naming it", n[1], err)
			}
			if held := liveRowsOf(t, tg, "all-or-nothing"); len(held) != 0 {
				t.Fatalf("after TryAcquireAll failed the owner still holds %q", held)
			}
			waitCtx, cancel := context.WithTimeout(owner, 200*time.Millisecond)
			_, err = l.AcquireAll(waitCtx, n)
			cancel()
			if !errors.Is(err, dblock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("AcquireAll whose context ended = %v, want ErrNotAcquired and DeadlineExceeded", err)
			}
			if held := liveRowsOf(t, tg, "all-or-nothing"); len(held) != 0 {
				t.Fatalf("after AcquireAll failed the owner still holds %q", held)
			}
			// The names it had taken are free for others at once.
			k, err := other.TryAcquire(ctx, n[0])
			if err != nil {
				t.Fatalf("a name given back: %v", err)
			}
			release(t, k)
			release(t, blocker)
			m, err := l.TryAcquireAll(owner, n)
			if err != nil {
				t.Fatalf("TryAcquireAll once free: %v", err)
			}
			release(t, m)
		})
	}
}

// TestAcquireAllWaits: AcquireAll waits for a held name, holding the names
// before it, and returns once it is released.
func TestAcquireAllWaits(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			l, other := newLocker(t, tg.DB), newLocker(t, tg.DB)
			n := names(t, 2)
			blocker, err := other.TryAcquire(ctx, n[1])
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				m   *rowlock.MultiLock
				err error
			}
			got := make(chan result, 1)
			go func() {
				m, err := l.AcquireAll(dblock.WithOwner(ctx, "waiter"), []string{n[1], n[0]})
				got <- result{m, err}
			}()
			eventually(t, ctx, "the waiter takes the first name", func() bool {
				return slices.Equal(liveRowsOf(t, tg, "waiter"), n[:1])
			})
			select {
			case r := <-got:
				t.Fatalf("AcquireAll returned while %q was held: %v", n[1], r.err)
			default:
			}
			release(t, blocker)
			r := <-got
			if r.err != nil {
				t.Fatalf("AcquireAll after the release: %v", r.err)
			}
			if held := liveRowsOf(t, tg, "waiter"); !slices.Equal(held, n) {
				t.Fatalf("the waiter holds %q, want %q", held, n)
			}
			if r.m.Tokens()[1] <= blocker.Token() {
				t.Fatalf("token of %q %d, not above the previous holder's %d", n[1], r.m.Tokens()[1], blocker.Token())
			}
			release(t, r.m)
		})
	}
}

// TestAcquireAllReentrant: the MultiLock's context carries its owner, so
// acquiring with it re-enters the names it holds (of any set).
func TestAcquireAllReentrant(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			n := names(t, 3)
			outer, err := l.AcquireAll(ctx, n[:2])
			if err != nil {
				t.Fatal(err)
			}
			inner, err := l.TryAcquireAll(outer.Context(), n[1:])
			if err != nil {
				t.Fatalf("re-entering with the MultiLock's context: %v", err)
			}
			if inner.Owner() != outer.Owner() || inner.Tokens()[0] != outer.Tokens()[1] {
				t.Fatalf("re-entered %q: owner %v token %d, want %v and %d", n[1], inner.Owner(), inner.Tokens()[0], outer.Owner(), outer.Tokens()[1])
			}
			single, err := l.TryAcquire(outer.Context(), n[0])
			if err != nil {
				t.Fatalf("re-entering one name with the MultiLock's context: %v", err)
			}
			if got := readRow(t, tg, n[1]).holdCount; got != 2 {
				t.Fatalf("hold count of the shared name %d, want 2", got)
			}
			release(t, inner)
			release(t, single)
			if row := readRow(t, tg, n[2]); row.holdCount != 0 {
				t.Fatalf("a name only the inner hold had is still held: %+v", row)
			}
			for _, name := range n[:2] {
				if row := readRow(t, tg, name); row.holdCount != 1 {
					t.Fatalf("row of %q after the inner holds' release: %+v, want held once", name, row)
				}
			}
			release(t, outer)
		})
	}
}

// TestMultiLockLostWhenAnyIs: one name taken over after its lease lapsed
// makes the whole MultiLock lost; Release still frees the others.
func TestMultiLockLostWhenAnyIs(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l, other := newLocker(t, tg.DB), newLocker(t, tg.DB)
			n := names(t, 3)
			// A lease long enough that the members not taken over renew in
			// time on a loaded machine (a 300 ms lease lost a member whose
			// renewal took longer than its deadline, and the test blamed
			// the wrong name); the taken member is found at the next
			// renewal, a third of it later.
			m, err := l.AcquireAll(ctx, n, dblock.TTL(3*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			expireNow(t, tg, n[1])
			taker, err := other.TryAcquire(ctx, n[1])
			if err != nil {
				t.Fatalf("takeover of a lapsed member: %v", err)
			}
			defer release(t, taker)
			waitDone(t, m, 10*time.Second)
			if err := m.Err(); !errors.Is(err, dblock.ErrLockLost) || !strings.Contains(err.Error(), n[1]) {
				t.Fatalf("Err after a member was taken over = %v, want ErrLockLost naming %q", err, n[1])
			}
			if cause := context.Cause(m.Context()); !errors.Is(cause, dblock.ErrLockLost) {
				t.Fatalf("context cause = %v", cause)
			}
			if err := m.Refresh(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Refresh of a lost MultiLock = %v", err)
			}
			tx, err := tg.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.CheckHeld(ctx, tx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("CheckHeld of a lost MultiLock = %v", err)
			}
			_ = tx.Rollback()
			if err := m.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Release of a lost MultiLock = %v, want ErrLockLost", err)
			}
			for _, name := range []string{n[0], n[2]} {
				if row := readRow(t, tg, name); row.holdCount != 0 {
					t.Fatalf("%q still held after Release of the lost MultiLock: %+v", name, row)
				}
			}
		})
	}
}

func TestMultiLockCheckHeld(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			m, err := l.AcquireAll(ctx, names(t, 2))
			if err != nil {
				t.Fatal(err)
			}
			defer release(t, m)
			tx, err := tg.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if err := m.CheckHeld(ctx, tx); err != nil {
				t.Fatalf("CheckHeld of a held MultiLock: %v", err)
			}
			if err := m.CheckHeld(ctx, nil); !errors.Is(err, dblock.ErrInvalidOption) {
				t.Fatalf("CheckHeld with a nil tx = %v, want ErrInvalidOption", err)
			}
		})
	}
}

func TestAcquireAllBadInput(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			closed := newLocker(t, tg.DB)
			_ = closed.Close()
			good := names(t, 2)
			canceled, cancel := context.WithCancel(ctx)
			cancel()
			cases := []struct {
				name  string
				l     *rowlock.Locker
				ctx   context.Context
				names []string
				opts  []dblock.Option
				want  error
			}{
				{"nil context", l, nil, good, nil, dblock.ErrInvalidOption},
				{"no names", l, ctx, nil, nil, dblock.ErrInvalidOption},
				{"empty list", l, ctx, []string{}, nil, dblock.ErrInvalidOption},
				{"an empty name among good ones", l, ctx, append(slices.Clone(good), ""), nil, dblock.ErrInvalidName},
				{"a name over 255 bytes", l, ctx, append(slices.Clone(good), strings.Repeat("n", 256)), nil, dblock.ErrInvalidName},
				{"a name not UTF-8", l, ctx, append(slices.Clone(good), "x\xff"), nil, dblock.ErrInvalidName},
				{"zero TTL", l, ctx, good, []dblock.Option{dblock.TTL(0)}, dblock.ErrInvalidOption},
				{"nil option", l, ctx, good, []dblock.Option{nil}, dblock.ErrInvalidOption},
				{"empty owner id", l, dblock.WithOwner(ctx, ""), good, nil, dblock.ErrInvalidOption},
				{"canceled context", l, canceled, good, nil, dblock.ErrNotAcquired},
				{"closed Locker", closed, ctx, good, nil, dblock.ErrClosed},
			}
			for _, c := range cases {
				for _, try := range []struct {
					how string
					fn  func(*rowlock.Locker) func(context.Context, []string, ...dblock.Option) (*rowlock.MultiLock, error)
				}{
					{"TryAcquireAll", func(l *rowlock.Locker) func(context.Context, []string, ...dblock.Option) (*rowlock.MultiLock, error) {
						return l.TryAcquireAll
					}},
					{"AcquireAll", func(l *rowlock.Locker) func(context.Context, []string, ...dblock.Option) (*rowlock.MultiLock, error) {
						return l.AcquireAll
					}},
				} {
					m, err := try.fn(c.l)(c.ctx, c.names, c.opts...)
					if !errors.Is(err, c.want) || m != nil {
						t.Errorf("%s: %s = (%v, %v), want %v", c.name, try.how, m, err, c.want)
					}
					for _, name := range good {
						if row := readRow(t, tg, name); row.exists {
							t.Fatalf("%s: %s wrote the row of %q: %+v", c.name, try.how, name, row)
						}
					}
				}
			}
		})
	}
}

// TestAcquireAllHammer: goroutines of two Lockers take random overlapping
// sets of a few names, listed in random orders, some giving up part-way.
// The ledger checks that no name ever has two holders and that each name's
// tokens grow from holder to holder; the context bounds the run, so a
// deadlock fails it. At the end no owner whose acquisition failed holds
// anything (see checkNothingLeft).
func TestAcquireAllHammer(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // liveness bound
			defer cancel()
			lockers := []*rowlock.Locker{newLocker(t, tg.DB), newLocker(t, tg.DB)}
			pool := names(t, 5)
			lg := newLedger(t)
			const workers, rounds = 6, 25
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					l := lockers[w%len(lockers)]
					for round := range rounds {
						if ctx.Err() != nil || lg.broken() {
							return
						}
						set := slices.Clone(pool)
						rand.Shuffle(len(set), func(i, j int) { set[i], set[j] = set[j], set[i] })
						set = set[:2+rand.IntN(len(set)-1)]
						owner := fmt.Sprintf("w%d-r%d", w, round)
						multiRound(t, ctx, tg, l, lg, owner, set, round%4)
					}
				})
			}
			wg.Wait()
			if ctx.Err() != nil {
				t.Fatalf("the hammer did not finish: deadlock or starvation? %v", ctx.Err())
			}
			checkNothingLeft(t, tg, lg)
		})
	}
}

// multiRound is one worker's turn in TestAcquireAllHammer: mode 0 gives
// up after a short wait, 1 tries without waiting, the others wait.
func multiRound(t *testing.T, ctx context.Context, tg testdb.Target, l *rowlock.Locker, lg *ledger, owner string, set []string, mode int) {
	octx := dblock.WithOwner(ctx, owner)
	var m *rowlock.MultiLock
	var err error
	var deadline time.Time
	switch mode {
	case 0:
		short, cancel := context.WithTimeout(octx, time.Duration(1+rand.IntN(20))*time.Millisecond)
		deadline, _ = short.Deadline()
		m, err = l.AcquireAll(short, set, dblock.TTL(5*time.Second))
		cancel()
	case 1:
		m, err = l.TryAcquireAll(octx, set, dblock.TTL(5*time.Second))
	default:
		m, err = l.AcquireAll(octx, set, dblock.TTL(5*time.Second))
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		// A statement cut short by the deadline may report the driver's
		// error (an i/o timeout) before the context reports its own.
		if !errors.Is(err, dblock.ErrNotAcquired) && (deadline.IsZero() || time.Now().Before(deadline)) {
			t.Errorf("owner %s: %v", owner, err)
			return
		}
		lg.failed(owner, len(liveRowsOf(t, tg, owner)))
		return
	}
	lg.mu.Lock()
	for i, name := range m.Names() {
		lg.holders[name]++
		if lg.holders[name] != 1 {
			lg.errorf("%q has %d holders", name, lg.holders[name])
		}
		if tok := m.Tokens()[i]; tok <= lg.lastToken[name] {
			lg.errorf("%q: token %d after %d", name, tok, lg.lastToken[name])
		} else {
			lg.lastToken[name] = tok
		}
	}
	lg.mu.Unlock()
	time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
	lg.mu.Lock()
	for _, name := range m.Names() {
		lg.holders[name]--
	}
	lg.mu.Unlock()
	if err := m.Release(context.WithoutCancel(ctx)); err != nil {
		t.Errorf("owner %s: Release: %v", owner, err)
	}
}
