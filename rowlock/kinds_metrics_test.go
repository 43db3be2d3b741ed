package rowlock_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/metrics"
	"github.com/sqllock/sqllock/internal/metrics/metricstest"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestKindMetrics reads back the lock type (sqllock.lock.type) that the
// lock kinds' measurements carry: each acquisition counted once, as its
// kind, not as the rows it took; each hold measured as its kind; and the
// rows a failed acquisition gave back not measured as holds at all.
func TestKindMetrics(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			read := metricstest.New(t)
			l := newLocker(t, tg.DB, rowlock.WithMeterProvider(read.Provider), rowlock.WithLogger(slog.New(slog.DiscardHandler)))

			// A semaphore of two permits: two taken, a third refused.
			sem, err := l.Semaphore(2)
			if err != nil {
				t.Fatal(err)
			}
			semName := testdb.Name(t)
			p1, err := sem.TryAcquire(ctx, semName)
			if err != nil {
				t.Fatal(err)
			}
			p2, err := sem.TryAcquire(ctx, semName)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sem.TryAcquire(ctx, semName); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("a third permit of two: %v, want ErrNotAcquired", err)
			}
			// A waiter for a permit shows among the waiters, as a
			// semaphore's, until it gives up.
			stopWaiting := waitingFor(t, ctx, func(ctx context.Context) (dblock.Lock, error) { return sem.Acquire(ctx, semName) })
			semWaiters := func(fair bool) int64 {
				n, _ := read.Collect(t).Int(metrics.NameWaiters, metrics.KeyType.String(string(metrics.TypeSemaphore)), metrics.KeyFair.Bool(fair))
				return n
			}
			bound, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			eventually(t, bound, "the waiting semaphore Acquire showing in sqllock.lock.waiters", func() bool { return semWaiters(false) == 1 })
			stopWaiting()
			if n := semWaiters(false); n != 0 {
				t.Errorf("semaphore waiters after the wait ended: %d, want 0", n)
			}
			// A fair one, counted by the fair queue, as a semaphore's.
			stopWaiting = waitingFor(t, ctx, func(ctx context.Context) (dblock.Lock, error) {
				return sem.Acquire(ctx, semName, dblock.Fair())
			})
			eventually(t, bound, "the fair semaphore waiter showing in sqllock.lock.waiters", func() bool { return semWaiters(true) == 1 })
			stopWaiting()
			if n, m := semWaiters(true), semWaiters(false); n != 0 || m != 0 {
				t.Errorf("semaphore waiters after the fair wait ended: %d fair, %d not, want 0", n, m)
			}
			release(t, p1)
			release(t, p2)

			// A reader in, a writer refused (it took the writer row and
			// gave it back), then let in.
			rwName := testdb.Name(t)
			r, err := l.Readers().TryAcquire(ctx, rwName)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Writers().TryAcquire(ctx, rwName); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("a writer beside a reader: %v, want ErrNotAcquired", err)
			}
			release(t, r)
			w, err := l.Writers().Acquire(ctx, rwName)
			if err != nil {
				t.Fatal(err)
			}
			release(t, w)

			// Two names at once.
			m, err := l.AcquireAll(ctx, []string{testdb.Name(t), testdb.Name(t)})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Release(ctx); err != nil {
				t.Fatal(err)
			}

			typ := func(t metrics.LockType) attribute.KeyValue { return metrics.KeyType.String(string(t)) }
			try, wait := metrics.KeyMode.String("try"), metrics.KeyMode.String("wait")
			acquired, notAcquired := metrics.KeyResult.String("acquired"), metrics.KeyResult.String("not_acquired")
			released := metrics.KeyEnd.String("released")
			snap := read.Collect(t)
			snap.Expect(t, []metricstest.Want{
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{typ(metrics.TypeSemaphore), try, acquired}, Value: 2},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{typ(metrics.TypeSemaphore), try, notAcquired}, Value: 1},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{typ(metrics.TypeSemaphore), wait, notAcquired}, Value: 2},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{typ(metrics.TypeRead), try, acquired}, Value: 1},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{typ(metrics.TypeWrite), try, notAcquired}, Value: 1},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{typ(metrics.TypeWrite), wait, acquired}, Value: 1},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{typ(metrics.TypeMulti), wait, acquired}, Value: 1},
				// The rows the kinds took are not acquisitions of their own.
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{typ(metrics.TypeMutex)}, Value: 0},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{metrics.KeyKind.String("rowlock")}, Value: 9},
				{Name: metrics.NameWaitDuration, Attrs: []attribute.KeyValue{typ(metrics.TypeSemaphore)}, Value: 5},
				{Name: metrics.NameHoldDuration, Attrs: []attribute.KeyValue{typ(metrics.TypeSemaphore), released}, Value: 2},
				{Name: metrics.NameHoldDuration, Attrs: []attribute.KeyValue{typ(metrics.TypeRead), released}, Value: 1},
				// Not the writer row the refused writer gave back.
				{Name: metrics.NameHoldDuration, Attrs: []attribute.KeyValue{typ(metrics.TypeWrite), released}, Value: 1},
				// One per name: each is a lock of its own.
				{Name: metrics.NameHoldDuration, Attrs: []attribute.KeyValue{typ(metrics.TypeMulti), released}, Value: 2},
				{Name: metrics.NameHoldDuration, Attrs: []attribute.KeyValue{typ(metrics.TypeMutex)}, Value: 0},
			})
		})
	}
}
