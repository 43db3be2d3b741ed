package rowlock_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestReadOnlyServer: a Locker whose pool reaches a read-only server (a
// standby after failover) says so with dblock.ErrReadOnly from every call,
// never "not acquired" (a cron job that is "not acquired" would quietly
// never run again), changes nothing, and a holder whose renewals fail that
// way loses the lock with ErrReadOnly as the cause.
func TestReadOnlyServer(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			sw := testdb.NewReadOnlySwitch(t, tg)
			l := newLocker(t, sw.DB)
			name := testdb.Name(t)
			wantReadOnly := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, dblock.ErrReadOnly) || errors.Is(err, dblock.ErrNotAcquired) {
					t.Errorf("%s on a read-only server = %v, want ErrReadOnly (and not ErrNotAcquired)", what, err)
				}
			}

			sw.Set(true)
			_, err := l.TryAcquire(ctx, name)
			wantReadOnly("TryAcquire", err)
			_, err = l.TryAcquire(ctx, name, dblock.Fair())
			wantReadOnly("TryAcquire, fair", err)
			// Acquire does not wait for ctx to end: retrying cannot help.
			waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
			_, err = l.Acquire(waitCtx, name)
			cancel()
			wantReadOnly("Acquire", err)
			_, err = l.Acquire(ctx, name, dblock.Fair())
			wantReadOnly("Acquire, fair", err)

			// A lock taken while writable: Refresh and Release say
			// read-only. The refused Refresh leaves the lock held; the
			// refused Release leaves the row as it was and the hold
			// releasable (as any failed Release does), and a Release once
			// the server is writable again frees it.
			sw.Set(false)
			k, err := l.TryAcquire(ctx, name, dblock.TTL(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			sw.Set(true)
			wantReadOnly("Refresh", k.Refresh(ctx))
			if err := k.Err(); err != nil {
				t.Fatalf("lock after a refused Refresh: %v, want still held", err)
			}
			wantReadOnly("Release", k.Release(ctx))
			sw.Set(false)
			if _, err := newLocker(t, tg.DB).TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("another owner's TryAcquire = %v, want ErrNotAcquired: the refused Release freed nothing", err)
			}
			// Released now: a hold left registered would keep the
			// Locker's session running after Close until its deadline.
			if err := k.Release(ctx); err != nil {
				t.Fatalf("Release once writable again: %v", err)
			}

			// Renewals refused until the deadline: the lock is lost, and
			// says why.
			k, err = l.TryAcquire(ctx, name, dblock.TTL(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			sw.Set(true)
			waitDone(t, k, 10*time.Second)
			if err := k.Err(); !errors.Is(err, dblock.ErrLockLost) || !errors.Is(err, dblock.ErrReadOnly) {
				t.Fatalf("Err after renewals on a read-only server = %v, want ErrLockLost caused by ErrReadOnly", err)
			}
		})
	}
}

// TestReadOnlyCauseOutlivesCutRenewal: a holder whose renewals were refused
// as read-only, and whose last renewal the deadline then cut short (here:
// waiting for a row lock), loses the lock with ErrReadOnly as the cause,
// not the deadline's "context deadline exceeded", which says nothing of
// why it could not renew.
func TestReadOnlyCauseOutlivesCutRenewal(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			sw := testdb.NewReadOnlySwitch(t, tg)
			logged := &renewalFailures{}
			l := newLocker(t, sw.DB, rowlock.WithLogger(slog.New(logged)))
			name := testdb.Name(t)
			k, err := l.TryAcquire(ctx, name, dblock.TTL(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = k.Release(context.Background()) }()
			// Renewals that get past the read-only check wait for this
			// transaction's row lock until the deadline cuts them short.
			tx, err := tg.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			q := tg.Q(`SELECT 1 FROM dblock_locks WHERE name = $1 FOR UPDATE`)
			var one int
			if err := tx.QueryRowContext(ctx, q, name).Scan(&one); err != nil {
				t.Fatal(err)
			}

			sw.Set(true)
			eventually(t, ctx, "a renewal refused as read-only", func() bool {
				return logged.any(func(err error) bool { return errors.Is(err, dblock.ErrReadOnly) })
			})
			sw.Set(false)
			waitDone(t, k, 10*time.Second)
			if !logged.any(func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }) {
				t.Fatal("no renewal was cut short by the deadline: the test did not test the case")
			}
			if err := k.Err(); !errors.Is(err, dblock.ErrLockLost) || !errors.Is(err, dblock.ErrReadOnly) {
				t.Fatalf("Err = %v, want ErrLockLost caused by ErrReadOnly", err)
			}
		})
	}
}

// renewalFailures is a slog.Handler that keeps the errors of the
// "renewal failed" records.
type renewalFailures struct {
	mu   sync.Mutex
	errs []error
}

func (*renewalFailures) Enabled(context.Context, slog.Level) bool { return true }
func (h *renewalFailures) WithAttrs([]slog.Attr) slog.Handler     { return h }
func (h *renewalFailures) WithGroup(string) slog.Handler          { return h }

func (h *renewalFailures) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "renewal failed") {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && a.Key == "error" {
			h.mu.Lock()
			h.errs = append(h.errs, err)
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

// any reports whether one of the errors so far satisfies match.
func (h *renewalFailures) any(match func(error) bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.ContainsFunc(h.errs, match)
}
