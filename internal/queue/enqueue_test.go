package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/testdb"
)

func TestMain(m *testing.M) {
	testdb.Main(m)
}

// lostReply is a store whose insert reaches the server and commits, after
// which the caller's ctx is canceled and the reply is lost if the insert's
// own ctx ended: what a driver does when a cancel races the reply of a
// statement the server has run. No real server can be made to lose that
// race on cue, hence the wrapper; the insert itself is the real one.
type lostReply struct {
	store
	cancelCaller context.CancelFunc
}

func (s lostReply) insert(ctx context.Context, name string, owner dblock.Owner, ttl time.Duration, key int64) (int64, error) {
	id, err := s.store.insert(ctx, name, owner, ttl, key)
	s.cancelCaller()
	if err == nil && ctx.Err() != nil {
		return 0, ctx.Err() // the reply, cut off by the cancel
	}
	return id, err
}

// TestEnqueueCanceledInFlight: an Enqueue whose ctx ends while its insert
// runs returns the ctx's error and leaves no row behind. A row left there,
// with a live session marker and nobody to leave it, would stand ahead of
// every later waiter for a whole TTL.
func TestEnqueueCanceledInFlight(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			q, err := New(tg.DB, WithDialect(tg.Dialect))
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			q.store = lostReply{store: q.store, cancelCaller: cancel}
			name := testdb.Name(t)
			if tk, err := q.Enqueue(ctx, name, lockinput.NewOwner(), 1); !errors.Is(err, context.Canceled) {
				t.Fatalf("Enqueue canceled in flight = %v, %v; want context.Canceled", tk, err)
			}
			ws, err := q.Waiters(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			if len(ws) != 0 {
				t.Fatalf("waiters after an Enqueue canceled in flight: %+v; want none", ws)
			}
		})
	}
}
