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

// TestMetrics reads the Locker's metrics back through the SDK's manual
// reader after a known sequence: acquisitions of each outcome, an unfair
// waiter, a lock lost with its session (killed by the server) and one
// released, and how waiters are woken.
func TestMetrics(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			read := metricstest.New(t)
			quiet := rowlock.WithLogger(slog.New(slog.DiscardHandler))
			l := newLocker(t, tg.DB, rowlock.WithMeterProvider(read.Provider), quiet)
			other := newLocker(t, tg.DB, quiet)
			mine, theirs := testdb.Name(t), testdb.Name(t)
			// Locker.Acquire's locks are mutexes.
			kind := metrics.KeyKind.String("rowlock")
			mutex := metrics.KeyType.String(string(metrics.TypeMutex))

			kept, err := other.TryAcquire(ctx, theirs)
			if err != nil {
				t.Fatal(err)
			}
			defer release(t, kept)
			if _, err := l.TryAcquire(ctx, theirs); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("TryAcquire of a held lock: %v", err)
			}
			waitCtx, stopWaiting := context.WithCancel(ctx)
			waited := make(chan error, 1)
			go func() {
				_, err := l.Acquire(waitCtx, theirs)
				waited <- err
			}()
			waiters := func() int64 {
				n, _ := read.Collect(t).Int(metrics.NameWaiters, kind, metrics.KeyFair.Bool(false))
				return n
			}
			for deadline := time.Now().Add(time.Minute); waiters() != 1; { // against hangs only
				if time.Now().After(deadline) {
					t.Fatal("the waiting Acquire never showed in sqllock.lock.waiters")
				}
				time.Sleep(10 * time.Millisecond)
			}
			// A waiter is woken by the database once its Locker's session
			// runs: NOTIFY on PostgreSQL, the doorbell on MySQL.
			wantMode, otherMode := metrics.WakeupNotified, metrics.WakeupPolling
			snap := read.Collect(t)
			if n, _ := snap.Int(metrics.NameWakeup, kind, metrics.KeyWakeup.String(string(wantMode))); n != 1 {
				t.Errorf("Lockers woken by %s = %d, want 1", wantMode, n)
			}
			if n, _ := snap.Int(metrics.NameWakeup, kind, metrics.KeyWakeup.String(string(otherMode))); n != 0 {
				t.Errorf("Lockers woken by %s = %d, want 0", otherMode, n)
			}
			stopWaiting()
			if err := <-waited; !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("canceled Acquire: %v", err)
			}

			// Lost with its session: the server ends it.
			lost, err := l.TryAcquire(ctx, mine)
			if err != nil {
				t.Fatal(err)
			}
			killMarkerSession(t, tg, mine)
			select {
			case <-lost.Done():
			case <-time.After(time.Minute): // against hangs only
				t.Fatal("the lock did not go with its session")
			}
			if err := lost.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Release of a lost lock: %v", err)
			}
			k, err := l.TryAcquire(ctx, mine)
			if err != nil {
				t.Fatal(err)
			}
			release(t, k)

			snap = read.Collect(t)
			snap.Expect(t, []metricstest.Want{
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{kind, metrics.KeyMode.String("try"), metrics.KeyResult.String("not_acquired")}, Value: 1},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{kind, metrics.KeyMode.String("wait"), metrics.KeyResult.String("not_acquired")}, Value: 1},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{kind, mutex, metrics.KeyMode.String("try"), metrics.KeyResult.String("acquired")}, Value: 2},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{kind, metrics.KeyResult.String("error")}, Value: 0},
				{Name: metrics.NameLost, Attrs: []attribute.KeyValue{kind, mutex, metrics.KeyCause.String("session_ended")}, Value: 1},
				{Name: metrics.NameWaiters, Attrs: []attribute.KeyValue{kind}, Value: 0},
				{Name: metrics.NameWaitDuration, Attrs: []attribute.KeyValue{kind}, Value: 4},
				{Name: metrics.NameHoldDuration, Attrs: []attribute.KeyValue{kind, metrics.KeyEnd.String("lost")}, Value: 1},
				{Name: metrics.NameHoldDuration, Attrs: []attribute.KeyValue{kind, mutex, metrics.KeyEnd.String("released")}, Value: 1},
			})
			for key := range snap.Keys() {
				switch key {
				case metrics.KeyKind, metrics.KeyType, metrics.KeyMode, metrics.KeyResult, metrics.KeyEnd, metrics.KeyCause, metrics.KeyFair, metrics.KeyWakeup, metrics.KeyReplication:
				default:
					t.Errorf("attribute %q recorded: only bounded ones may be", key)
				}
			}
		})
	}
}

func TestNilMeterProvider(t *testing.T) {
	if _, err := rowlock.New(testdb.AllTargets(t)[0].DB, rowlock.WithMeterProvider(nil)); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("rowlock.New with a nil MeterProvider: %v, want ErrInvalidOption", err)
	}
}
