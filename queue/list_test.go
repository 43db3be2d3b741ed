package queue_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/queue"
)

// isolated returns tg on a migrated schema of its own: ListAll, CountDead
// and DeleteDead see every name, other tests' too.
func isolated(t *testing.T, tg testdb.Target) testdb.Target {
	t.Helper()
	own := testdb.Migrated(t, tg, "sqllock_queue")
	return own
}

// newQueue returns a Queue closed when the test ends.
func newQueue(t *testing.T, tg testdb.Target, ttl time.Duration) *queue.Queue {
	t.Helper()
	q, err := queue.New(tg.DB, queue.WithDialect(tg.Dialect), queue.WithWaiterTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	return q
}

// enqueue queues n waiters of name and returns their tickets.
func enqueue(t *testing.T, q *queue.Queue, name string, n int) []*queue.Ticket {
	t.Helper()
	var tickets []*queue.Ticket
	for range n {
		tk, err := q.Enqueue(t.Context(), name, lockinput.NewOwner(), 0)
		if err != nil {
			t.Fatal(err)
		}
		tickets = append(tickets, tk)
	}
	return tickets
}

// deadWaiters queues n waiters of name on a queue that stops heartbeating
// at once, and waits until their heartbeats have lapsed.
func deadWaiters(t *testing.T, tg testdb.Target, name string, n int) []*queue.Ticket {
	t.Helper()
	q := newQueue(t, tg, queue.MinWaiterTTL)
	tickets := enqueue(t, q, name, n)
	q.Close()
	time.Sleep(3 * queue.MinWaiterTTL)
	return tickets
}

func TestListAll(t *testing.T) {
	for _, shared := range testdb.Targets(t) {
		t.Run(shared.Name, func(t *testing.T) {
			tg := isolated(t, shared)
			deadWaiters(t, tg, "a", 1)
			q := newQueue(t, tg, queue.DefaultWaiterTTL)
			// Queued out of name order: the listing sorts by name, then id.
			b := enqueue(t, q, "b", 2)
			a := enqueue(t, q, "a", 3)
			type entry struct {
				name     string
				id       int64
				position int
			}
			all := []entry{{"a", a[0].ID(), 1}, {"a", a[1].ID(), 2}, {"a", a[2].ID(), 3}, {"b", b[0].ID(), 1}, {"b", b[1].ID(), 2}}
			for _, limit := range []int{1, 4, 5, 100} {
				t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
					ws, err := q.AllWaiters(t.Context(), limit)
					if err != nil {
						t.Fatal(err)
					}
					want := all[:min(limit, len(all))]
					if len(ws) != len(want) {
						t.Fatalf("ListAll(%d) = %d waiters %+v, want %d (the dead one left out)", limit, len(ws), ws, len(want))
					}
					for i, w := range ws {
						if got := (entry{w.Name, w.ID, w.Position}); got != want[i] || w.Waited < 0 || w.ExpiresIn <= 0 {
							t.Errorf("waiter %d = %+v, want %+v", i, w, want[i])
						}
					}
				})
			}
			if _, err := q.AllWaiters(t.Context(), 0); !errors.Is(err, dblock.ErrInvalidOption) {
				t.Errorf("ListAll(0) = %v, want ErrInvalidOption", err)
			}
		})
	}
}

func TestDeleteDead(t *testing.T) {
	for _, shared := range testdb.Targets(t) {
		t.Run(shared.Name, func(t *testing.T) {
			tg := isolated(t, shared)
			ctx := t.Context()
			dead := deadWaiters(t, tg, "gone", 5)
			q := newQueue(t, tg, queue.DefaultWaiterTTL)
			enqueue(t, q, "live", 2)
			if n, err := q.CountDead(ctx); err != nil || n != 5 {
				t.Fatalf("CountDead = %d, %v; want 5", n, err)
			}
			steps := []struct {
				grace      time.Duration
				limit      int
				wantDelete int
				wantLeft   int
			}{
				{time.Hour, 10, 0, 5}, // lapsed less than the grace ago
				{0, 2, 2, 3},
				{0, 10, 3, 0},
				{0, 10, 0, 0},
			}
			for _, s := range steps {
				n, err := q.DeleteDead(ctx, s.grace, s.limit)
				if err != nil || n != s.wantDelete {
					t.Fatalf("DeleteDead(%v, %d) = %d, %v; want %d", s.grace, s.limit, n, err, s.wantDelete)
				}
				if left, err := q.CountDead(ctx); err != nil || left != s.wantLeft {
					t.Fatalf("after DeleteDead(%v, %d): CountDead = %d, %v; want %d", s.grace, s.limit, left, err, s.wantLeft)
				}
				if s.limit == 2 {
					// Oldest first: the two lowest ids are gone.
					var oldest int64
					query := `SELECT min(id) FROM dblock_waiters WHERE name = 'gone'`
					if err := tg.DB.QueryRowContext(ctx, query).Scan(&oldest); err != nil || oldest != dead[2].ID() {
						t.Fatalf("oldest dead waiter left: id %d, %v; want %d", oldest, err, dead[2].ID())
					}
				}
			}
			if ws, err := q.Waiters(ctx, "live"); err != nil || len(ws) != 2 {
				t.Fatalf("live waiters after deleting the dead: %+v, %v; want 2", ws, err)
			}
		})
	}
}
