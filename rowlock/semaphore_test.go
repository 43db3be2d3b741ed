package rowlock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// slotRow is the lock row of permit slot i of semaphore name.
func slotRow(name string, i int) string { return fmt.Sprintf("%s␟s%d", name, i) }

// semaphore returns l's semaphore of limit permits.
func semaphore(t testing.TB, l *rowlock.Locker, limit int) dblock.Semaphore {
	t.Helper()
	s, err := l.Semaphore(limit)
	if err != nil {
		t.Fatalf("Semaphore(%d): %v", limit, err)
	}
	return s
}

// recordedLimit reads the limit recorded for semaphore name; 0 when none.
func recordedLimit(t testing.TB, tg testdb.Target, name string) int {
	t.Helper()
	q := tg.Q(`SELECT permits FROM dblock_semaphores WHERE name = $1`)
	var n int
	err := tg.DB.QueryRowContext(context.Background(), q, name).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0
	}
	if err != nil {
		t.Fatalf("limit of %q: %v", name, err)
	}
	return n
}

func TestSemaphore(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			a, b := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)
			sa, sb := semaphore(t, a, 3), semaphore(t, b, 3)
			if sa.Limit() != 3 {
				t.Fatalf("Limit = %d", sa.Limit())
			}
			var permits []*rowlock.Permit
			slots := map[int]bool{}
			for i, s := range []dblock.Semaphore{sa, sb, sa} {
				k, err := s.TryAcquire(ctx, name, dblock.Note("worker"))
				if err != nil {
					t.Fatalf("permit %d of 3: %v", i, err)
				}
				p := k.(*rowlock.Permit)
				if p.Name() != name || p.Token() <= 0 || p.Err() != nil || slots[p.Slot()] || p.Slot() < 0 || p.Slot() > 2 {
					t.Fatalf("permit %d: name %q slot %d (taken: %v) token %d err %v", i, p.Name(), p.Slot(), slots, p.Token(), p.Err())
				}
				slots[p.Slot()] = true
				row := readRow(t, tg, slotRow(name, p.Slot()))
				if row.ownerID != p.Owner().ID || row.holdCount != 1 || row.token != p.Token() || row.note != "worker" {
					t.Fatalf("row of slot %d = %+v, want held by %s with token %d", p.Slot(), row, p.Owner().ID, p.Token())
				}
				permits = append(permits, p)
			}
			if got := recordedLimit(t, tg, name); got != 3 {
				t.Fatalf("recorded limit %d, want 3", got)
			}
			for _, s := range []dblock.Semaphore{sa, sb} {
				if _, err := s.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
					t.Fatalf("a fourth permit of 3: %v, want ErrNotAcquired", err)
				}
			}
			got := make(chan acquired, 1)
			go func() {
				k, err := sb.Acquire(ctx, name)
				got <- acquired{k, err}
			}()
			// Time for the waiter to find every slot held and sleep (the
			// test holds either way; it exercises the wake-up if so).
			time.Sleep(50 * time.Millisecond)
			select {
			case r := <-got:
				t.Fatalf("Acquire returned with every permit held: %v", r.err)
			default:
			}
			freed := permits[1]
			release(t, freed)
			r := <-got
			if r.err != nil {
				t.Fatalf("Acquire after a release: %v", r.err)
			}
			p := r.lock.(*rowlock.Permit)
			if p.Slot() != freed.Slot() || p.Token() <= freed.Token() {
				t.Fatalf("waiter got slot %d token %d, want the freed slot %d with a token above %d", p.Slot(), p.Token(), freed.Slot(), freed.Token())
			}
			permits[1] = p
			for _, p := range permits {
				release(t, p)
				if !errors.Is(p.Err(), dblock.ErrReleased) {
					t.Fatalf("Err after release = %v", p.Err())
				}
				if err := p.Release(ctx); !errors.Is(err, dblock.ErrNotHeld) {
					t.Fatalf("second Release = %v, want ErrNotHeld", err)
				}
			}
			for i := range 3 {
				if row := readRow(t, tg, slotRow(name, i)); row.holdCount != 0 {
					t.Fatalf("slot %d after every release: %+v", i, row)
				}
			}
		})
	}
}

// TestSemaphoreLimitMismatch: a limit other than the one in use is a
// typed error and changes nothing; once no permit is held, the new limit
// is taken up.
func TestSemaphoreLimitMismatch(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			l, other := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)
			three, five, two := semaphore(t, l, 3), semaphore(t, other, 5), semaphore(t, other, 2)
			held, err := three.TryAcquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			asker := dblock.WithOwner(ctx, "other-limit")
			for _, try := range []struct {
				how string
				fn  func(context.Context, string, ...dblock.Option) (dblock.Lock, error)
			}{
				{"TryAcquire with 5", five.TryAcquire}, {"Acquire with 5", five.Acquire},
				{"TryAcquire with 2", two.TryAcquire}, {"Acquire with 2", two.Acquire},
			} {
				k, err := try.fn(asker, name)
				if !errors.Is(err, dblock.ErrLimitMismatch) || k != nil {
					t.Fatalf("%s while 3 is in use = (%v, %v), want ErrLimitMismatch", try.how, k, err)
				}
				if rows := liveRowsOf(t, tg, "other-limit"); len(rows) != 0 {
					t.Fatalf("%s left %q held", try.how, rows)
				}
				if got := recordedLimit(t, tg, name); got != 3 || held.Err() != nil {
					t.Fatalf("%s changed the limit to %d (holder's Err %v)", try.how, got, held.Err())
				}
			}
			// Full under one limit: another one fails at once rather
			// than waiting for holders it disagrees with.
			one := semaphore(t, other, 1)
			if _, err := one.Acquire(asker, name); !errors.Is(err, dblock.ErrLimitMismatch) {
				t.Fatalf("Acquire with 1 while slot 0 is held under 3 = %v, want ErrLimitMismatch", err)
			}
			release(t, held)
			k, err := five.TryAcquire(asker, name)
			if err != nil {
				t.Fatalf("a new limit once no permit is held: %v", err)
			}
			if got := recordedLimit(t, tg, name); got != 5 {
				t.Fatalf("recorded limit %d after the change, want 5", got)
			}
			if _, err := three.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrLimitMismatch) {
				t.Fatalf("the old limit under the new one = %v, want ErrLimitMismatch", err)
			}
			release(t, k)
		})
	}
}

// TestSemaphoreReentrant: an owner holds one permit of a name; acquiring
// again with its context re-enters it, even at the limit.
func TestSemaphoreReentrant(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			l := newLocker(t, tg.DB)
			name := testdb.Name(t)
			s := semaphore(t, l, 2)
			outer, err := s.Acquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			other, err := s.Acquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			inner, err := s.Acquire(outer.Context(), name)
			if err != nil {
				t.Fatalf("re-entering at the limit: %v", err)
			}
			po, pi := outer.(*rowlock.Permit), inner.(*rowlock.Permit)
			if pi.Slot() != po.Slot() || pi.Token() != po.Token() || pi.Owner() != po.Owner() {
				t.Fatalf("re-entered slot %d token %d, want slot %d token %d", pi.Slot(), pi.Token(), po.Slot(), po.Token())
			}
			if got := readRow(t, tg, slotRow(name, po.Slot())).holdCount; got != 2 {
				t.Fatalf("hold count %d, want 2", got)
			}
			release(t, inner)
			if _, err := s.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("a stranger after the inner release = %v, want ErrNotAcquired", err)
			}
			release(t, outer)
			release(t, other)
		})
	}
}

func TestSemaphoreBadInput(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			for _, limit := range []int{0, -1, rowlock.MaxSemaphoreLimit + 1} {
				if s, err := l.Semaphore(limit); !errors.Is(err, dblock.ErrInvalidOption) || s != nil {
					t.Errorf("Semaphore(%d) = (%v, %v), want ErrInvalidOption", limit, s, err)
				}
			}
			closed := newLocker(t, tg.DB)
			_ = closed.Close()
			good := testdb.Name(t)
			canceled, cancel := context.WithCancel(ctx)
			cancel()
			// A name a plain lock may have, but too long once the slot's
			// suffix is added.
			long := strings.Repeat("n", dblock.MaxNameLength-3)
			cases := []struct {
				name  string
				l     *rowlock.Locker
				ctx   context.Context
				lock  string
				limit int
				opts  []dblock.Option
				want  error
			}{
				{"nil context", l, nil, good, 2, nil, dblock.ErrInvalidOption},
				{"empty name", l, ctx, "", 2, nil, dblock.ErrInvalidName},
				{"name not UTF-8", l, ctx, "x\xff", 2, nil, dblock.ErrInvalidName},
				{"name too long for its slots", l, ctx, long, 2, nil, dblock.ErrInvalidName},
				{"name too long for slot 999", l, ctx, long[:dblock.MaxNameLength-6], rowlock.MaxSemaphoreLimit, nil, dblock.ErrInvalidName},
				{"zero TTL", l, ctx, good, 2, []dblock.Option{dblock.TTL(0)}, dblock.ErrInvalidOption},
				{"nil option", l, ctx, good, 2, []dblock.Option{nil}, dblock.ErrInvalidOption},
				{"empty owner id", l, dblock.WithOwner(ctx, ""), good, 2, nil, dblock.ErrInvalidOption},
				{"canceled context", l, canceled, good, 2, nil, dblock.ErrNotAcquired},
				{"closed Locker", closed, ctx, good, 2, nil, dblock.ErrClosed},
			}
			for _, c := range cases {
				s := semaphore(t, c.l, c.limit)
				for _, try := range []struct {
					how string
					fn  func(context.Context, string, ...dblock.Option) (dblock.Lock, error)
				}{{"TryAcquire", s.TryAcquire}, {"Acquire", s.Acquire}} {
					k, err := try.fn(c.ctx, c.lock, c.opts...)
					if !errors.Is(err, c.want) || k != nil {
						t.Errorf("%s: %s = (%v, %v), want %v", c.name, try.how, k, err, c.want)
					}
				}
			}
			for i := range 2 {
				if row := readRow(t, tg, slotRow(good, i)); row.exists {
					t.Fatalf("bad input wrote slot %d: %+v", i, row)
				}
			}
			if got := recordedLimit(t, tg, good); got != 0 {
				t.Fatalf("bad input recorded a limit: %d", got)
			}
		})
	}
}

// TestSemaphoreDo: a Semaphore is a dblock.Locker.
func TestSemaphoreDo(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			s := semaphore(t, newLocker(t, tg.DB), 1)
			name := testdb.Name(t)
			ran := false
			err := dblock.Do(ctx, s, name, func(ctx context.Context) error {
				ran = true
				if _, err := s.TryAcquire(context.Background(), name); !errors.Is(err, dblock.ErrNotAcquired) {
					return fmt.Errorf("a second permit of 1 under Do: %v", err)
				}
				return nil
			})
			if err != nil || !ran {
				t.Fatalf("Do = %v (ran %v)", err, ran)
			}
			if row := readRow(t, tg, slotRow(name, 0)); row.holdCount != 0 {
				t.Fatalf("slot after Do: %+v", row)
			}
		})
	}
}

// TestSemaphoreHammer: goroutines of two Lockers take and give back
// permits of one name, waiting, trying, or giving up after a short wait.
// The ledger checks that never more than the limit hold a permit, that a
// slot never has two holders, that each slot's tokens grow, and that
// owners whose acquisition failed are left holding nothing.
func TestSemaphoreHammer(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // liveness bound
			defer cancel()
			const limit, workers, rounds = 3, 8, 20
			sems := []dblock.Semaphore{semaphore(t, newLocker(t, tg.DB), limit), semaphore(t, newLocker(t, tg.DB), limit)}
			name := testdb.Name(t)
			lg := newLedger(t)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					s := sems[w%len(sems)]
					for round := range rounds {
						if ctx.Err() != nil || lg.broken() {
							return
						}
						semRound(t, ctx, tg, s, lg, name, fmt.Sprintf("w%d-r%d", w, round), round%4)
					}
				})
			}
			wg.Wait()
			if ctx.Err() != nil {
				t.Fatalf("the hammer did not finish: %v", ctx.Err())
			}
			if lg.holders[name] != 0 {
				t.Fatalf("ledger ends with %d holders", lg.holders[name])
			}
			checkNothingLeft(t, tg, lg)
		})
	}
}

// semRound is one worker's turn in TestSemaphoreHammer: mode 0 gives up
// after a short wait, 1 tries without waiting, the others wait.
func semRound(t *testing.T, ctx context.Context, tg testdb.Target, s dblock.Semaphore, lg *ledger, name, owner string, mode int) {
	octx := dblock.WithOwner(ctx, owner)
	opts := []dblock.Option{dblock.TTL(5 * time.Second)}
	var k dblock.Lock
	var err error
	var deadline time.Time
	switch mode {
	case 0:
		short, cancel := context.WithTimeout(octx, time.Duration(1+rand.IntN(20))*time.Millisecond)
		deadline, _ = short.Deadline()
		k, err = s.Acquire(short, name, opts...)
		cancel()
	case 1:
		k, err = s.TryAcquire(octx, name, opts...)
	default:
		k, err = s.Acquire(octx, name, opts...)
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
	p := k.(*rowlock.Permit)
	slot := slotRow(name, p.Slot())
	lg.mu.Lock()
	lg.holders[name]++
	lg.holders[slot]++
	if lg.holders[name] > s.Limit() || lg.holders[slot] != 1 {
		lg.errorf("%d holders of %d permits, %d of slot %d", lg.holders[name], s.Limit(), lg.holders[slot], p.Slot())
	}
	if p.Token() <= lg.lastToken[slot] {
		lg.errorf("slot %d: token %d after %d", p.Slot(), p.Token(), lg.lastToken[slot])
	} else {
		lg.lastToken[slot] = p.Token()
	}
	lg.mu.Unlock()
	time.Sleep(time.Duration(rand.IntN(4)) * time.Millisecond)
	lg.mu.Lock()
	lg.holders[name]--
	lg.holders[slot]--
	lg.mu.Unlock()
	if err := p.Release(context.WithoutCancel(ctx)); err != nil {
		t.Errorf("owner %s: Release: %v", owner, err)
	}
}

// TestChildSemaphoreHolder is the body of the child process of
// TestKilledHolderGivesPermitBack; in a normal run it returns at once. It
// takes the only permit of SQLLOCK_CHILD_LOCK with the default crash grace
// and TTL (or SQLLOCK_CHILD_TTL), says "held <token>", and waits to be
// killed; with SQLLOCK_CHILD_RELEASE_ON_USR1 set, SIGUSR1 makes it release
// the permit and say "released" first.
func TestChildSemaphoreHolder(t *testing.T) {
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
		s, err := l.Semaphore(1)
		if err != nil {
			t.Fatal(err)
		}
		ttl := dblock.DefaultTTL
		if v := os.Getenv("SQLLOCK_CHILD_TTL"); v != "" {
			if ttl, err = time.ParseDuration(v); err != nil {
				t.Fatal(err)
			}
		}
		k, err := s.Acquire(context.Background(), name, dblock.TTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("held %d\n", k.Token())
		if os.Getenv("SQLLOCK_CHILD_RELEASE_ON_USR1") == "" {
			select {} // until killed
		}
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		<-usr1
		if err := k.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		fmt.Println("released")
		select {} // until killed
	}
}

// TestSemaphoreWaiterNotifiedAcrossProcesses: a waiter for a permit held
// in another process is woken by the release: its NOTIFY on PostgreSQL,
// the holder's doorbell on MySQL. The waiter's Locker polls once an hour
// and the holder's lease has ten minutes left, so a waiter that gets the
// permit within the test's minute was woken by the announcement. (Before
// the kinds rang doorbells, MySQL's semaphore waiters polled every 10 ms.)
func TestSemaphoreWaiterNotifiedAcrossProcesses(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // what proves the wake-up
			defer cancel()
			name := testdb.Name(t)
			child := testdb.Child(t, "TestChildSemaphoreHolder", "SQLLOCK_CHILD_LOCK="+name, "SQLLOCK_CHILD_DIALECT="+tg.Name,
				"SQLLOCK_CHILD_TTL=10m", "SQLLOCK_CHILD_RELEASE_ON_USR1=1")
			if _, err := child.WaitLine(ctx, "held "); err != nil {
				t.Fatalf("child did not report holding the permit: %v", err)
			}
			l := newLocker(t, tg.DB, rowlock.WithPollInterval(time.Hour, time.Hour), rowlock.WithIdleRecheck(time.Hour))
			s := semaphore(t, l, 1)
			got := make(chan acquired, 1)
			go func() {
				k, err := s.Acquire(ctx, name)
				got <- acquired{k, err}
			}()
			// Until the waiter has asked for the announcement, the release
			// would not send it.
			eventually(t, ctx, "the waiter asks to be woken", func() bool { return wanted(t, tg, slotRow(name, 0)) })
			childReleases(t, ctx, child)
			r := <-got
			if r.err != nil {
				t.Fatalf("the waiter was not woken by the release in the other process: %v", r.err)
			}
			release(t, r.lock)
		})
	}
}

// wanted reads whether a waiter asked for name's release to be announced.
func wanted(t testing.TB, tg testdb.Target, name string) bool {
	t.Helper()
	return lockColumn[bool](t, tg, "wanted", name)
}

// TestKilledHolderGivesPermitBack: SIGKILL the holder of a semaphore's
// only permit, whose lease has 30 seconds to run; a waiter in another
// process gets the permit long before, once the holder's session marker
// is gone (see crash_test.go).
func TestKilledHolderGivesPermitBack(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			name := testdb.Name(t)
			child := testdb.Child(t, "TestChildSemaphoreHolder", "SQLLOCK_CHILD_LOCK="+name, "SQLLOCK_CHILD_DIALECT="+tg.Name)
			childToken := heldToken(t, ctx, child)
			slot := slotRow(name, 0)
			leaseEnd := expiresAtMicros(t, tg, slot)
			s := semaphore(t, newLocker(t, tg.DB), 1)
			got := make(chan acquired, 1)
			go func() {
				k, err := s.Acquire(ctx, name)
				got <- acquired{k, err}
			}()
			killedAt := dbNowMicros(t, tg)
			child.Kill()
			r := <-got
			if r.err != nil {
				t.Fatalf("Acquire after the holder was killed: %v", r.err)
			}
			defer release(t, r.lock)
			acquired := checkTakenBefore(t, tg, r.lock, slot, leaseEnd, childToken, "its lease was not cut short")
			t.Logf("permit taken %v after SIGKILL (database clock)", time.Duration(acquired-killedAt)*time.Microsecond)
		})
	}
}

// TestSemaphoreSchemaMissing: a schema from before migration 3 has no
// dblock_semaphores; semaphores say which migration is missing, and leave
// no slot held.
func TestSemaphoreSchemaMissing(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			old := testdb.Migrated(t, tg, "semaphores_missing")
			if _, err := old.DB.ExecContext(ctx, `DROP TABLE dblock_semaphores`); err != nil {
				t.Fatal(err)
			}
			s := semaphore(t, newLocker(t, old.DB), 2)
			name := testdb.Name(t)
			for _, try := range []func(context.Context, string, ...dblock.Option) (dblock.Lock, error){s.TryAcquire, s.Acquire} {
				if _, err := try(ctx, name); !errors.Is(err, dblock.ErrSchemaMissing) || !strings.Contains(err.Error(), "migrations.Up") {
					t.Fatalf("semaphore without its table = %v, want ErrSchemaMissing naming migrations.Up", err)
				}
				for i := range 2 {
					if row := readRow(t, old, slotRow(name, i)); row.holdCount != 0 {
						t.Fatalf("slot %d left held: %+v", i, row)
					}
				}
			}
		})
	}
}

// TestSweepSemaphores: records of names with no permit held, written
// longer ago than the grace, are deleted in batches; a record in use is
// kept.
func TestSweepSemaphores(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			// A schema of its own: a sweep reads the whole table.
			own := testdb.Migrated(t, tg, "sweep_semaphores")
			l := newLocker(t, own.DB)
			three := semaphore(t, l, 3)
			busy, err := three.TryAcquire(ctx, "busy")
			if err != nil {
				t.Fatal(err)
			}
			var idle []string
			for i := range 5 {
				name := fmt.Sprintf("idle-%d", i)
				k, err := three.TryAcquire(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				release(t, k)
				idle = append(idle, name)
			}
			sweep := func(grace time.Duration) int {
				total := 0
				for after := ""; ; {
					n, next, err := l.SweepSemaphores(ctx, grace, 2, after)
					if err != nil {
						t.Fatalf("SweepSemaphores after %q: %v", after, err)
					}
					total += n
					if next == "" {
						return total
					}
					if next <= after {
						t.Fatalf("SweepSemaphores after %q returned %q: the position must move forward", after, next)
					}
					after = next
				}
			}
			if n := sweep(time.Hour); n != 0 {
				t.Fatalf("a sweep with an hour's grace deleted %d records written just now", n)
			}
			if n := sweep(0); n != len(idle) {
				t.Fatalf("a sweep deleted %d records, want the %d idle ones", n, len(idle))
			}
			for _, name := range idle {
				if got := recordedLimit(t, own, name); got != 0 {
					t.Fatalf("idle %q kept its record (%d)", name, got)
				}
			}
			if got := recordedLimit(t, own, "busy"); got != 3 || busy.Err() != nil {
				t.Fatalf("the record in use: %d (holder's Err %v), want 3 kept", got, busy.Err())
			}
			// An idle name takes any limit, recorded again.
			k, err := semaphore(t, l, 7).TryAcquire(ctx, idle[0])
			if err != nil {
				t.Fatal(err)
			}
			release(t, k)
			if got := recordedLimit(t, own, idle[0]); got != 7 {
				t.Fatalf("record after a sweep and a new acquisition: %d, want 7", got)
			}
			release(t, busy)

			for _, c := range []struct {
				name  string
				ctx   context.Context
				grace time.Duration
				limit int
				after string
			}{
				{"nil context", nil, 0, 10, ""},
				{"negative grace", ctx, -time.Second, 10, ""},
				{"zero limit", ctx, 0, 0, ""},
				{"limit over MaxSweepBatch", ctx, 0, rowlock.MaxSweepBatch + 1, ""},
				{"after too long", ctx, 0, 10, strings.Repeat("x", dblock.MaxNameLength+1)},
			} {
				if _, _, err := l.SweepSemaphores(c.ctx, c.grace, c.limit, c.after); !errors.Is(err, dblock.ErrInvalidOption) {
					t.Errorf("%s: %v, want ErrInvalidOption", c.name, err)
				}
			}
		})
	}
}
