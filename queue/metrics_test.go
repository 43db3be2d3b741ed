package queue_test

import (
	"errors"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/metrics"
	"github.com/sqllock/sqllock/internal/metrics/metricstest"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/queue"
)

// TestWaitersMetric reads the fair waiters gauge back: up with each
// Enqueue, down with each Leave, and a second Leave changes nothing.
func TestWaitersMetric(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			read := metricstest.New(t)
			q, err := queue.New(tg.DB, queue.WithDialect(tg.Dialect), queue.WithMeterProvider(read.Provider))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(q.Close)
			waiters := func() int64 {
				n, _ := read.Collect(t).Int(metrics.NameWaiters, metrics.KeyKind.String("rowlock"), metrics.KeyFair.Bool(true))
				return n
			}
			name := testdb.Name(t)
			var tickets []*queue.Ticket
			for want := int64(1); want <= 3; want++ {
				tk, err := q.Enqueue(t.Context(), name, lockinput.NewOwner(), 0)
				if err != nil {
					t.Fatal(err)
				}
				tickets = append(tickets, tk)
				if got := waiters(); got != want {
					t.Fatalf("after %d Enqueue: %d waiters", want, got)
				}
			}
			for i, tk := range tickets {
				for range 2 {
					if err := tk.Leave(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				if got, want := waiters(), int64(len(tickets)-i-1); got != want {
					t.Fatalf("after %d Leave: %d waiters, want %d", i+1, got, want)
				}
			}
		})
	}
}

func TestNilMeterProvider(t *testing.T) {
	tg := testdb.AllTargets(t)[0]
	if _, err := queue.New(tg.DB, queue.WithDialect(tg.Dialect), queue.WithMeterProvider(nil)); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("queue.New with a nil MeterProvider: %v, want ErrInvalidOption", err)
	}
}
