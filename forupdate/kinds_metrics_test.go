package forupdate_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/metrics"
	"github.com/sqllock/sqllock/internal/metrics/metricstest"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestKindMetrics reads back the lock type (sqllock.lock.type) that the
// measurements of forupdate's semaphores and read/write locks carry:
// their acquisitions, waiters, holds and losses are a semaphore's, a
// reader's or a writer's, never a mutex's.
func TestKindMetrics(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			read := metricstest.New(t)
			l := newLocker(t, tg.DB, forupdate.WithMeterProvider(read.Provider), forupdate.WithLogger(slog.New(slog.DiscardHandler)))

			// A semaphore of two permits: two taken, a third refused.
			sem := semaphore(t, l, 2)
			semName := testdb.Name(t)
			p1, err := tryPermit(ctx, sem, semName)
			if err != nil {
				t.Fatal(err)
			}
			p2, err := tryPermit(ctx, sem, semName)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sem.TryAcquire(ctx, semName); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("a third permit of two: %v, want ErrNotAcquired", err)
			}
			// A waiter for a permit shows among the waiters, as a
			// semaphore's, until it gives up.
			waitCtx, stopWaiting := context.WithCancel(ctx)
			defer stopWaiting()
			waited := acquireAsyncWith(waitCtx, sem, semName)
			semWaiters := []attribute.KeyValue{metrics.KeyType.String(string(metrics.TypeSemaphore)), metrics.KeyFair.Bool(false)}
			awaitWaiters(t, read, semWaiters...)
			stopWaiting()
			if r := await(t, waited); !errors.Is(r.err, dblock.ErrNotAcquired) {
				t.Fatalf("canceled semaphore Acquire: %v, want ErrNotAcquired", r.err)
			}
			if n, _ := read.Collect(t).Int(metrics.NameWaiters, semWaiters...); n != 0 {
				t.Errorf("semaphore waiters after the wait ended: %d, want 0", n)
			}
			release(t, p1)
			release(t, p2)
			// A permit lost: its transaction committed behind Release's back.
			lost, err := tryPermit(ctx, sem, semName)
			if err != nil {
				t.Fatal(err)
			}
			if err := lost.Tx().Commit(); err != nil {
				t.Fatal(err)
			}
			if err := lost.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Release of a lost permit: %v, want ErrLockLost", err)
			}

			// A reader in, a writer refused, then let in.
			rwName := testdb.Name(t)
			r, err := try(ctx, l.Readers(), rwName)
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

			typ := func(t metrics.LockType) attribute.KeyValue { return metrics.KeyType.String(string(t)) }
			try, wait := metrics.KeyMode.String("try"), metrics.KeyMode.String("wait")
			acquired, notAcquired := metrics.KeyResult.String("acquired"), metrics.KeyResult.String("not_acquired")
			released, ended := metrics.KeyEnd.String("released"), metrics.KeyEnd.String("lost")
			snap := read.Collect(t)
			snap.Expect(t, []metricstest.Want{
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{typ(metrics.TypeSemaphore), try, acquired}, Value: 3},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{typ(metrics.TypeSemaphore), try, notAcquired}, Value: 1},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{typ(metrics.TypeSemaphore), wait, notAcquired}, Value: 1},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{typ(metrics.TypeRead), try, acquired}, Value: 1},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{typ(metrics.TypeWrite), try, notAcquired}, Value: 1},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{typ(metrics.TypeWrite), wait, acquired}, Value: 1},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{typ(metrics.TypeMutex)}, Value: 0},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{metrics.KeyKind.String("forupdate")}, Value: 8},
				{Name: metrics.NameLost, Attrs: []attribute.KeyValue{typ(metrics.TypeSemaphore), metrics.KeyCause.String("transaction_ended")}, Value: 1},
				{Name: metrics.NameLost, Attrs: []attribute.KeyValue{typ(metrics.TypeMutex)}, Value: 0},
				{Name: metrics.NameWaitDuration, Attrs: []attribute.KeyValue{typ(metrics.TypeSemaphore)}, Value: 5},
				{Name: metrics.NameWaitDuration, Attrs: []attribute.KeyValue{typ(metrics.TypeWrite)}, Value: 2},
				{Name: metrics.NameHoldDuration, Attrs: []attribute.KeyValue{typ(metrics.TypeSemaphore), released}, Value: 2},
				{Name: metrics.NameHoldDuration, Attrs: []attribute.KeyValue{typ(metrics.TypeSemaphore), ended}, Value: 1},
				{Name: metrics.NameHoldDuration, Attrs: []attribute.KeyValue{typ(metrics.TypeRead), released}, Value: 1},
				{Name: metrics.NameHoldDuration, Attrs: []attribute.KeyValue{typ(metrics.TypeWrite), released}, Value: 1},
				{Name: metrics.NameHoldDuration, Attrs: []attribute.KeyValue{typ(metrics.TypeMutex)}, Value: 0},
			})
		})
	}
}
