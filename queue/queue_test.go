package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/queue"
)

func TestMain(m *testing.M) {
	testdb.Main(m)
}

func TestQueue(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			const ttl = 500 * time.Millisecond
			q, err := queue.New(tg.DB, queue.WithDialect(tg.Dialect), queue.WithWaiterTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			name := testdb.Name(t)
			owners := []dblock.Owner{lockinput.NewOwner(), lockinput.NewOwner(), lockinput.NewOwner()}
			var tickets []*queue.Ticket
			for _, o := range owners {
				tk, err := q.Enqueue(ctx, name, o, 0)
				if err != nil {
					t.Fatal(err)
				}
				tickets = append(tickets, tk)
			}
			// Heartbeats keep slow waiters queued well past one TTL.
			time.Sleep(3 * ttl)
			ws, err := q.Waiters(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if len(ws) != 3 {
				t.Fatalf("after 3 TTLs: %d waiters, want 3 (heartbeats keep them)", len(ws))
			}
			for i, w := range ws {
				if w.Position != i+1 || w.ID != tickets[i].ID() || w.OwnerID != owners[i].ID || w.Name != name || w.Waited <= 0 || w.ExpiresIn <= 0 {
					t.Fatalf("waiter %d = %+v", i, w)
				}
			}
			if err := tickets[1].Leave(ctx); err != nil {
				t.Fatal(err)
			}
			if err := tickets[1].Leave(ctx); err != nil {
				t.Fatalf("second Leave: %v", err)
			}
			ws, _ = q.Waiters(ctx, name)
			if len(ws) != 2 || ws[0].ID != tickets[0].ID() || ws[1].ID != tickets[2].ID() || ws[1].Position != 2 {
				t.Fatalf("after the middle left: %+v", ws)
			}
			// A ticket's position is its place among the live waiters; 0
			// once it has left.
			for i, want := range []int{1, 0, 2} {
				if pos, err := tickets[i].Position(ctx); err != nil || pos != want {
					t.Errorf("ticket %d: Position = %d, %v; want %d", i, pos, err, want)
				}
			}
			// A closed queue stops heartbeating: its waiters lapse.
			q.Close()
			time.Sleep(2 * ttl)
			ws, _ = q.Waiters(ctx, name)
			if len(ws) != 0 {
				t.Fatalf("waiters without heartbeat still listed: %+v", ws)
			}
		})
	}
}

func TestQueueBadInput(t *testing.T) {
	tg := testdb.AllTargets(t)[0]
	if _, err := queue.New(nil, queue.WithDialect(tg.Dialect)); !errors.Is(err, dblock.ErrInvalidDB) {
		t.Errorf("nil db: %v", err)
	}
	if _, err := queue.New(tg.DB, queue.WithDialect("oracle")); !errors.Is(err, dblock.ErrUnknownDialect) {
		t.Errorf("dialect: %v", err)
	}
	if _, err := queue.New(tg.DB, queue.WithDialect(tg.Dialect), queue.WithWaiterTTL(time.Millisecond)); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("tiny TTL: %v", err)
	}
	q, err := queue.New(tg.DB, queue.WithDialect(tg.Dialect))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Enqueue(t.Context(), "", lockinput.NewOwner(), 0); !errors.Is(err, dblock.ErrInvalidName) {
		t.Errorf("empty name: %v", err)
	}
	for _, c := range []struct {
		grace time.Duration
		limit int
	}{{-time.Second, 1}, {0, 0}, {0, 10001}} {
		if _, err := q.DeleteDead(t.Context(), c.grace, c.limit); !errors.Is(err, dblock.ErrInvalidOption) {
			t.Errorf("DeleteDead(%v, %d) = %v, want ErrInvalidOption", c.grace, c.limit, err)
		}
	}
}

// TestLeaveAfterClose: a waiter that leaves after its Queue was closed
// still deletes its row, which would otherwise hold up the queue until it
// lapsed.
func TestLeaveAfterClose(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			q, err := queue.New(tg.DB, queue.WithDialect(tg.Dialect)) // waiters live 10 s
			if err != nil {
				t.Fatal(err)
			}
			name := testdb.Name(t)
			tk, err := q.Enqueue(ctx, name, lockinput.NewOwner(), 0)
			if err != nil {
				t.Fatal(err)
			}
			q.Close()
			if err := tk.Leave(ctx); err != nil {
				t.Fatal(err)
			}
			if ws, err := q.Waiters(ctx, name); err != nil || len(ws) != 0 {
				t.Fatalf("after Close and Leave: %+v, %v; want no waiter", ws, err)
			}
		})
	}
}
