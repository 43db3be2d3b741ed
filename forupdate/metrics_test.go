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
			waiters := func() int64 {
				n, _ := read.Collect(t).Int(metrics.NameWaiters, metrics.KeyKind.String("forupdate"), metrics.KeyFair.Bool(false))
				return n
			}
			deadline := time.Now().Add(time.Minute)
			for waiters() != 1 {
				if time.Now().After(deadline) {
					t.Fatal("the waiting Acquire never showed in sqllock.lock.waiters")
				}
				time.Sleep(10 * time.Millisecond)
			}
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
			for _, c := range []struct {
				name  string
				attrs []attribute.KeyValue
				want  int64
			}{
				{metrics.NameAcquisitions, []attribute.KeyValue{kind, metrics.KeyMode.String("try"), metrics.KeyResult.String("not_acquired")}, 1},
				{metrics.NameAcquisitions, []attribute.KeyValue{kind, metrics.KeyMode.String("wait"), metrics.KeyResult.String("not_acquired")}, 1},
				{metrics.NameAcquisitions, []attribute.KeyValue{kind, metrics.KeyMode.String("wait"), metrics.KeyResult.String("acquired")}, 2},
				{metrics.NameAcquisitions, []attribute.KeyValue{kind, metrics.KeyResult.String("error")}, 0},
				{metrics.NameLost, []attribute.KeyValue{kind, metrics.KeyCause.String("transaction_ended")}, 1},
				{metrics.NameWaiters, []attribute.KeyValue{kind}, 0},
			} {
				if got, _ := snap.Int(c.name, c.attrs...); got != c.want {
					t.Errorf("%s%v = %d, want %d", c.name, c.attrs, got, c.want)
				}
			}
			for _, c := range []struct {
				name  string
				attrs []attribute.KeyValue
				want  uint64
			}{
				{metrics.NameWaitDuration, []attribute.KeyValue{kind}, 4},
				{metrics.NameHoldDuration, []attribute.KeyValue{kind, metrics.KeyEnd.String("lost")}, 1},
				{metrics.NameHoldDuration, []attribute.KeyValue{kind, metrics.KeyEnd.String("released")}, 1},
			} {
				if got := snap.Count(c.name, c.attrs...); got != c.want {
					t.Errorf("%s%v recorded %d values, want %d", c.name, c.attrs, got, c.want)
				}
			}
			if u := snap.Unit(metrics.NameWaitDuration); u != "s" {
				t.Errorf("unit of %s = %q, want s", metrics.NameWaitDuration, u)
			}
			for key := range snap.Keys() {
				switch key {
				case metrics.KeyKind, metrics.KeyMode, metrics.KeyResult, metrics.KeyEnd, metrics.KeyCause, metrics.KeyFair:
				default:
					t.Errorf("attribute %q recorded: only bounded ones may be", key)
				}
			}
		})
	}
}

func TestNilMeterProvider(t *testing.T) {
	if _, err := forupdate.New(targets(t)[0].DB, forupdate.WithMeterProvider(nil)); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("forupdate.New with a nil MeterProvider: %v, want ErrInvalidOption", err)
	}
}
