package rowlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/queue"
	"github.com/sqllock/sqllock/rowlock"
)

// waitQueued polls (bounded) until name has n live fair waiters.
func waitQueued(t testing.TB, l *rowlock.Locker, name string, n int) []rowlock.Waiter {
	t.Helper()
	for range 1000 {
		ws, err := l.Waiters(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) == n {
			return ws
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%q never had %d waiters", name, n)
	return nil
}

// TestFairOrder: 16 fair waiters on two Lockers, enqueuing concurrently,
// take the lock in exactly the order of their places in the queue, round
// after round. Waiters that are not first in their Locker never recheck on
// their own during the test, so a waiter left asleep while the lock is
// free hangs the round until its liveness bound.
func TestFairOrder(t *testing.T) {
	waiters, rounds := 16, 10
	if testing.Short() {
		rounds = 3
	}
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			lockers := []*rowlock.Locker{
				newLocker(t, tg.DB, rowlock.WithIdleRecheck(time.Hour)),
				newLocker(t, tg.DB, rowlock.WithIdleRecheck(time.Hour)),
			}
			name := testdb.Name(t)
			for round := range rounds {
				fairRound(t, lockers, name, round, waiters)
			}
		})
	}
}

// fairRound queues waiters fair waiters at once behind a holder, releases
// it, and checks that they got the lock in queue order.
func fairRound(t *testing.T, lockers []*rowlock.Locker, name string, round, waiters int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
	defer cancel()
	holder, err := lockers[0].Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for i := range waiters {
		owner := fmt.Sprintf("round-%d-waiter-%d", round, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := lockers[i%2].Acquire(dblock.WithOwner(ctx, owner), name, dblock.Fair())
			if err != nil {
				errs <- fmt.Errorf("%s: %w", owner, err)
				return
			}
			mu.Lock()
			got = append(got, owner)
			mu.Unlock()
			if err := k.Release(context.Background()); err != nil {
				errs <- err
			}
		}()
	}
	var want []string
	for _, w := range waitQueued(t, lockers[0], name, waiters) {
		want = append(want, w.OwnerID)
	}
	release(t, holder)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("round %d: %v", round, err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("round %d: acquisition order\n%v\nqueue order\n%v", round, got, want)
	}
}

// TestFairHeadPollsInItsLocker: the waiter of a Locker that polls and is
// woken by releases is the one with the oldest place in the queue, not the
// one that called Acquire first. Here the first caller is sent to the tail
// (its row deleted, as when it lapsed: its heartbeat queues it again), and
// the other waiters of the Locker never recheck on their own during the
// test: if the first caller still polled, the real head would sleep while
// the lock is free, and the test would hang until its liveness bound.
func TestFairHeadPollsInItsLocker(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			l := newLocker(t, tg.DB, rowlock.WithWaiterTTL(300*time.Millisecond), rowlock.WithIdleRecheck(time.Hour))
			name := testdb.Name(t)
			holder, err := newLocker(t, tg.DB).TryAcquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan string, 2)
			failed, released := make(chan error, 2), make(chan error, 2)
			wait := func(owner string) {
				k, err := l.Acquire(dblock.WithOwner(ctx, owner), name, dblock.Fair())
				if err != nil {
					failed <- fmt.Errorf("%s: %w", owner, err)
					return
				}
				got <- owner
				released <- k.Release(context.Background())
			}
			go wait("first-caller")
			ws := waitQueued(t, l, name, 1)
			go wait("second-caller")
			waitQueued(t, l, name, 2)
			deleteWaiter(t, tg, ws[0].ID)
			waitQueueOrder(t, l, name, "second-caller", "first-caller")
			release(t, holder)
			for _, want := range []string{"second-caller", "first-caller"} {
				select {
				case owner := <-got:
					if owner != want {
						t.Fatalf("%s got the lock, want %s", owner, want)
					}
				case err := <-failed:
					t.Fatalf("waiter failed before %s got the lock: %v", want, err)
				}
			}
			for range 2 {
				if err := <-released; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// deleteWaiter deletes a waiter row by hand.
func deleteWaiter(t testing.TB, tg testdb.Target, id int64) {
	t.Helper()
	q := tg.Q(`DELETE FROM dblock_waiters WHERE id = $1`)
	if _, err := tg.DB.ExecContext(context.Background(), q, id); err != nil {
		t.Fatalf("delete waiter %d: %v", id, err)
	}
}

// waitQueueOrder polls (bounded) until name's live waiters are owners, in
// that order.
func waitQueueOrder(t testing.TB, l *rowlock.Locker, name string, owners ...string) {
	t.Helper()
	var ids []string
	for range 1000 {
		ws, err := l.Waiters(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		ids = ids[:0]
		for _, w := range ws {
			ids = append(ids, w.OwnerID)
		}
		if fmt.Sprint(ids) == fmt.Sprint(owners) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("queue of %q is %v, never %v", name, ids, owners)
}

// TestQueueBlocksBargers: while a fair waiter is queued, a free lock goes to
// nobody else, fair or not; the holder may still re-enter.
func TestQueueBlocksBargers(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			name := testdb.Name(t)
			holder, err := l.TryAcquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			// A live waiter of another process: queued and heartbeating,
			// but never trying.
			q, err := queue.New(tg.DB, queue.WithDialect(tg.Dialect))
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			ticket, err := q.Enqueue(ctx, name, lockinput.NewOwner(), 0)
			if err != nil {
				t.Fatal(err)
			}
			again, err := l.TryAcquire(holder.Context(), name)
			if err != nil {
				t.Fatalf("re-entry while others queue: %v", err)
			}
			release(t, again)
			release(t, holder)
			if _, err := l.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("unfair TryAcquire past a live queue = %v, want ErrNotAcquired", err)
			}
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			if _, err := l.Acquire(short, name, dblock.Fair()); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("fair newcomer behind a live waiter = %v, want ErrNotAcquired", err)
			}
			ws := waitQueued(t, l, name, 1)
			if ws[0].ID != ticket.ID() || ws[0].Position != 1 || ws[0].OwnerHost != lockinput.ProcessHost() {
				t.Fatalf("waiters = %+v: the canceled newcomer must be gone, the live waiter first", ws)
			}
			if err := ticket.Leave(ctx); err != nil {
				t.Fatal(err)
			}
			k, err := l.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire after the queue emptied: %v", err)
			}
			release(t, k)
		})
	}
}

// TestFairCancelMidQueue: a waiter whose context ends leaves the queue at
// once; the others keep their order.
func TestFairCancelMidQueue(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			name := testdb.Name(t)
			holder, err := l.TryAcquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			order := make(chan int, 3)
			cancels := make([]context.CancelFunc, 3)
			done := make(chan error, 3)
			for i := range 3 {
				wctx, cancel := context.WithCancel(ctx)
				cancels[i] = cancel
				go func() {
					k, err := l.Acquire(wctx, name, dblock.Fair())
					if err == nil {
						order <- i
						err = k.Release(ctx)
					}
					done <- err
				}()
				waitQueued(t, l, name, i+1)
			}
			cancels[1]()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("canceled waiter: %v", err)
			}
			ws, err := l.Waiters(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if len(ws) != 2 {
				t.Fatalf("queue after cancel = %+v, want 2 waiters", ws)
			}
			release(t, holder)
			for range 2 {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			if a, b := <-order, <-order; a != 0 || b != 2 {
				t.Fatalf("order %d, %d; want 0, 2", a, b)
			}
			for _, c := range cancels {
				c()
			}
		})
	}
}

// TestChildFairWaiter is the body of the child process of
// TestDeadWaiterIsPassedOver; in a normal run it returns at once.
func TestChildFairWaiter(t *testing.T) {
	if !testdb.IsChild() {
		return
	}
	name, dialect := os.Getenv("SQLLOCK_CHILD_LOCK"), os.Getenv("SQLLOCK_CHILD_DIALECT")
	for _, tg := range testdb.AllTargets(t) {
		if tg.Name != dialect {
			continue
		}
		ttl := 500 * time.Millisecond
		if s := os.Getenv("SQLLOCK_CHILD_WAITER_TTL"); s != "" {
			ttl, _ = time.ParseDuration(s)
		}
		l, err := rowlock.New(tg.DB, rowlock.WithWaiterTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				if ws, _ := l.Waiters(context.Background(), name); len(ws) == 1 {
					fmt.Println("queued")
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
		_, err = l.Acquire(context.Background(), name, dblock.Fair())
		t.Fatalf("child got past the holder: %v", err)
	}
}

// TestDeadWaiterIsPassedOver: the head of the queue is SIGKILLed. The lock
// is not given past it while its row is live by the database clock, and is
// given to the next waiter once the row lapses.
func TestDeadWaiterIsPassedOver(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			name := testdb.Name(t)
			holder, err := l.TryAcquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			child := testdb.Child(t, "TestChildFairWaiter",
				append(tg.ChildEnv(), "SQLLOCK_CHILD_LOCK="+name, "SQLLOCK_CHILD_DIALECT="+tg.Name)...)
			waitCtx, cancel := context.WithTimeout(ctx, time.Minute) // liveness bound
			defer cancel()
			if _, err := child.WaitLine(waitCtx, "queued"); err != nil {
				t.Fatal(err)
			}
			got := make(chan dblock.Lock, 1)
			failed := make(chan error, 1)
			go func() {
				k, err := l.Acquire(waitCtx, name, dblock.Fair())
				if err != nil {
					failed <- err
					return
				}
				got <- k
			}()
			dead := waitQueued(t, l, name, 2)[0]
			if dead.OwnerHost == lockinput.ProcessHost() {
				t.Fatalf("queue head %+v is not the child", dead)
			}
			child.Kill()
			deadExpires := waiterExpiresAtMicros(t, tg, dead.ID)
			release(t, holder)
			var k dblock.Lock
			select {
			case k = <-got:
			case err := <-failed:
				t.Fatalf("waiter behind a dead one: %v", err)
			}
			defer release(t, k)
			// A heartbeat the child had sent may have landed after the
			// first read: the row's last expiry is what counts.
			deadExpires = max(deadExpires, waiterExpiresAtMicros(t, tg, dead.ID))
			if acquired := acquiredAtMicros(t, tg, name); acquired < deadExpires {
				t.Fatalf("lock given past the dead waiter %v before its row lapsed",
					time.Duration(deadExpires-acquired)*time.Microsecond)
			}
		})
	}
}

// waiterExpiresAtMicros reads a waiter row's expires_at, by the database
// clock, in microseconds since the epoch.
func waiterExpiresAtMicros(t testing.TB, tg testdb.Target, id int64) int64 {
	t.Helper()
	q := `SELECT (extract(epoch FROM expires_at) * 1000000)::bigint FROM dblock_waiters WHERE id = $1`
	switch tg.Dialect {
	case dblock.MySQL:
		q = `SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', expires_at) FROM dblock_waiters WHERE id = ?`
	case dblock.SQLite:
		q = `SELECT expires_at FROM dblock_waiters WHERE id = ?`
	}
	var us int64
	if err := tg.DB.QueryRowContext(context.Background(), q, id).Scan(&us); err != nil {
		t.Fatalf("expires_at of waiter %d: %v", id, err)
	}
	return us
}

func TestFairBadInput(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			if _, err := rowlock.New(tg.DB, rowlock.WithWaiterTTL(0)); !errors.Is(err, dblock.ErrInvalidOption) {
				t.Errorf("zero waiter TTL: %v", err)
			}
			l := newLocker(t, tg.DB)
			if _, err := l.Acquire(t.Context(), "", dblock.Fair()); !errors.Is(err, dblock.ErrInvalidName) {
				t.Errorf("empty name: %v", err)
			}
			if _, err := l.Waiters(t.Context(), ""); !errors.Is(err, dblock.ErrInvalidName) {
				t.Errorf("Waiters(\"\"): %v", err)
			}
		})
	}
}
