package rowlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/testdb"
)

// A fair semaphore gives its permits in arrival order: with both permits
// held, three fair waiters that arrive one after the other get the
// permits released one by one in that order, each woken with the others,
// and a fair TryAcquire does not pass them while a permit is free for the
// head of the line.
func TestSemaphoreFair(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			holders := semaphore(t, newLocker(t, tg.DB), 2)
			p1, err := holders.TryAcquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			p2, err := holders.TryAcquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}

			// Each waiter on a Locker of its own, as in processes of their own.
			l := newLocker(t, tg.DB)
			queued := func() int {
				ws, err := l.AllWaiters(ctx, 1000)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, w := range ws {
					if strings.HasPrefix(w.Name, name+lockinput.KindSeparator) {
						n++
					}
				}
				return n
			}
			type got struct {
				who int
				p   dblock.Lock
				err error
			}
			gots := make(chan got, 3)
			waitCtx, stop := context.WithTimeout(ctx, time.Minute)
			defer stop()
			for who := range 3 {
				s := semaphore(t, newLocker(t, tg.DB), 2)
				go func() {
					p, err := s.Acquire(waitCtx, name, dblock.Fair())
					gots <- got{who, p, err}
				}()
				eventually(t, waitCtx, fmt.Sprintf("waiter %d joining the line", who), func() bool { return queued() == who+1 })
			}

			next := func(want int) dblock.Lock {
				t.Helper()
				select {
				case g := <-gots:
					if g.err != nil || g.who != want {
						t.Fatalf("waiter %d got the permit (err %v), want waiter %d", g.who, g.err, want)
					}
					return g.p
				case <-time.After(time.Minute): // against hangs only
					t.Fatalf("no waiter got the permit, want waiter %d", want)
				}
				return nil
			}
			release(t, p1)
			first := next(0)
			// One permit is held by a waiter, one by p2: a fair
			// TryAcquire finds none free; an unfair one neither.
			if _, err := semaphore(t, l, 2).TryAcquire(ctx, name, dblock.Fair()); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("fair TryAcquire with every permit held: %v", err)
			}
			release(t, p2)
			second := next(1)
			release(t, first)
			third := next(2)
			release(t, second)
			release(t, third)
			if n := queued(); n != 0 {
				t.Errorf("%d waiters left in the line", n)
			}
		})
	}
}

// A fair TryAcquire does not take a free permit while a waiter that
// arrived before it is in line; one without Fair does not look at the
// line.
func TestSemaphoreFairTryRespectsLine(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			l := newLocker(t, tg.DB)
			s := semaphore(t, l, 1)
			// A waiter in line, as another process's (package queue's
			// table, under the semaphore's line's name), with no permit
			// held: it is about to take the free one.
			insertWaiterFor(t, tg, name+lockinput.KindSeparator+"q")
			if _, err := s.TryAcquire(ctx, name, dblock.Fair()); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("fair TryAcquire past a waiter in line: %v, want ErrNotAcquired", err)
			}
			p, err := s.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire without Fair: %v", err)
			}
			release(t, p)
		})
	}
}

// insertWaiterFor queues a live waiter for name directly in the waiter
// table, heartbeating for a minute, and removes it at the end of the test.
func insertWaiterFor(t *testing.T, tg testdb.Target, name string) {
	t.Helper()
	until := `clock_timestamp() + INTERVAL '1 minute'`
	ins := `INSERT INTO dblock_waiters (name, owner_host, owner_id, created_at, expires_at) VALUES ($1, 'test', 'ahead', clock_timestamp(), ` + until + `)`
	del := `DELETE FROM dblock_waiters WHERE name = $1`
	if tg.Dialect == dblock.MySQL {
		until = `UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE`
		ins = `INSERT INTO dblock_waiters (name, owner_host, owner_id, created_at, expires_at) VALUES (?, 'test', 'ahead', UTC_TIMESTAMP(6), ` + until + `)`
		del = `DELETE FROM dblock_waiters WHERE name = ?`
	}
	if _, err := tg.DB.ExecContext(t.Context(), ins, name); err != nil {
		t.Fatal(fmt.Errorf("queueing a waiter: %w", err))
	}
	t.Cleanup(func() {
		if _, err := tg.DB.ExecContext(context.Background(), del, name); err != nil {
			t.Errorf("removing the waiter: %v", err)
		}
	})
}
