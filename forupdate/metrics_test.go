package forupdate_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/metrics"
	"github.com/sqllock/sqllock/internal/metrics/metricstest"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestMetrics reads the Locker's metrics back through the SDK's manual
// reader after a known sequence: acquisitions of each outcome, a waiter,
// a lock lost (its transaction ended outside Release) and one released.
func TestMetrics(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			read := metricstest.New(t)
			l := newLocker(t, tg.DB, forupdate.WithMeterProvider(read.Provider), forupdate.WithLogger(slog.New(slog.DiscardHandler)))
			other := newLocker(t, tg.DB, forupdate.WithLogger(slog.New(slog.DiscardHandler)))
			mine, theirs := testdb.Name(t), testdb.Name(t)

			kept := acquire(t, ctx, other, theirs)
			defer release(t, kept)
			if _, err := l.TryAcquire(ctx, theirs); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("TryAcquire of a held lock: %v", err)
			}
			// A waiter, counted while it waits, then given up.
			waitCtx, stopWaiting := context.WithCancel(ctx)
			waited := make(chan error, 1)
			go func() {
				_, err := l.Acquire(waitCtx, theirs)
				waited <- err
			}()
			awaitWaiters(t, read, metrics.KeyKind.String("forupdate"), metrics.KeyFair.Bool(false))
			stopWaiting()
			if err := <-waited; !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("canceled Acquire: %v", err)
			}

			// Lost: the lock's transaction committed behind Release's back
			// (found by a ping on PostgreSQL, by Release's commit on MySQL).
			lost := acquire(t, ctx, l, mine)
			if err := lost.Tx().Commit(); err != nil {
				t.Fatal(err)
			}
			if err := lost.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Release of a lost lock: %v", err)
			}
			release(t, acquire(t, ctx, l, mine))

			snap := read.Collect(t)
			kind := metrics.KeyKind.String("forupdate")
			snap.Expect(t, []metricstest.Want{
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{kind, metrics.KeyMode.String("try"), metrics.KeyResult.String("not_acquired")}, Value: 1},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{kind, metrics.KeyMode.String("wait"), metrics.KeyResult.String("not_acquired")}, Value: 1},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{kind, metrics.KeyMode.String("wait"), metrics.KeyResult.String("acquired")}, Value: 2},
				{Name: metrics.NameAcquisitions, Attrs: []attribute.KeyValue{kind, metrics.KeyResult.String("error")}, Value: 0},
				{Name: metrics.NameLost, Attrs: []attribute.KeyValue{kind, metrics.KeyCause.String("transaction_ended")}, Value: 1},
				{Name: metrics.NameWaiters, Attrs: []attribute.KeyValue{kind}, Value: 0},
				{Name: metrics.NameWaitDuration, Attrs: []attribute.KeyValue{kind}, Value: 4},
				{Name: metrics.NameHoldDuration, Attrs: []attribute.KeyValue{kind, metrics.KeyEnd.String("lost")}, Value: 1},
				{Name: metrics.NameHoldDuration, Attrs: []attribute.KeyValue{kind, metrics.KeyEnd.String("released")}, Value: 1},
			})
			if u := snap.Unit(metrics.NameWaitDuration); u != "s" {
				t.Errorf("unit of %s = %q, want s", metrics.NameWaitDuration, u)
			}
			for key := range snap.Keys() {
				switch key {
				case metrics.KeyKind, metrics.KeyType, metrics.KeyMode, metrics.KeyResult, metrics.KeyEnd, metrics.KeyCause, metrics.KeyFair, metrics.KeyReplication:
				default:
					t.Errorf("attribute %q recorded: only bounded ones may be", key)
				}
			}
		})
	}
}

// awaitWaiters waits until sqllock.lock.waiters with attrs counts one
// waiter, and fails the test after a generous bound (liveness, not timing).
func awaitWaiters(t *testing.T, read *metricstest.Reader, attrs ...attribute.KeyValue) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if n, _ := read.Collect(t).Int(metrics.NameWaiters, attrs...); n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiting Acquire never showed in %s%v", metrics.NameWaiters, attrs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNilMeterProvider(t *testing.T) {
	servers := targets(t) // none when SQLLOCK_TEST_DIALECTS=sqlite
	for _, tg := range servers[:min(1, len(servers))] {
		if _, err := forupdate.New(tg.DB, forupdate.WithMeterProvider(nil)); !errors.Is(err, dblock.ErrInvalidOption) {
			t.Errorf("forupdate.New with a nil MeterProvider: %v, want ErrInvalidOption", err)
		}
	}
}
