package rowlock_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/metrics"
	"github.com/sqllock/sqllock/internal/metrics/metricstest"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// logRecords is an slog handler that keeps the messages it is given.
type logRecords struct {
	mu   sync.Mutex
	msgs []string
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Message)
	h.mu.Unlock()
	return nil
}
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

// count is how many messages contained part.
func (h *logRecords) count(part string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if strings.Contains(m, part) {
			n++
		}
	}
	return n
}

// TestSessionThroughPooler: a Locker whose session connection goes through
// PgBouncer in transaction mode cannot rely on it: LISTEN there succeeds
// but sits on a pooled server connection that hands nothing back, and a
// marker would stay on a server connection that outlives the process. The
// Locker checks with a NOTIFY round trip instead of assuming, says so once
// in its log and in the wake-up metric (polling), takes its locks without a
// marker, and its waiters poll (at most every
// 10 ms). Given a direct session connection (WithSessionDB), the same
// Locker listens, is counted as notified, and marks its locks.
func TestSessionThroughPooler(t *testing.T) {
	if testdb.LeftOut(t, "postgres") {
		return
	}
	var direct testdb.Target
	for _, tg := range testdb.Targets(t) {
		if tg.Dialect == dblock.Postgres {
			direct = tg
		}
	}
	pooled := testdb.PgBouncer(t)
	cases := []struct {
		name    string
		opts    []rowlock.Option
		mode    metrics.WakeupMode
		marked  bool
		warning int
	}{
		{"no session DSN", nil, metrics.WakeupPolling, false, 1},
		{"direct session DSN", []rowlock.Option{rowlock.WithSessionDB(direct.DB)}, metrics.WakeupNotified, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // against hangs only
			defer cancel()
			logs := &logRecords{}
			read := metricstest.New(t)
			opts := append([]rowlock.Option{rowlock.WithLogger(slog.New(logs)), rowlock.WithMeterProvider(read.Provider)}, c.opts...)
			l := newLocker(t, pooled.DB, opts...)
			holder := newLocker(t, direct.DB)
			name := testdb.Name(t)
			for round := range 2 { // the warning is said once, not per wait
				k, err := holder.TryAcquire(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				got := acquireAsync(ctx, l, name)
				// The waiter has tried, found the lock held, and settled
				// how it is woken.
				for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
					if n, _ := read.Collect(t).Int(metrics.NameWaiters, metrics.KeyFair.Bool(false)); n == 1 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the waiter never waited")
					}
				}
				release(t, k)
				r := <-got
				if r.err != nil {
					t.Fatalf("round %d: Acquire: %v", round, r.err)
				}
				if key := sessionKeyOf(t, direct, name); (key != 0) != c.marked {
					t.Errorf("round %d: the row's session_key is %d, want a marker: %v", round, key, c.marked)
				}
				release(t, r.lock)
			}
			snap := read.Collect(t)
			if n, _ := snap.Int(metrics.NameWakeup, metrics.KeyWakeup.String(string(c.mode))); n != 1 {
				t.Errorf("Lockers counted as %s = %d, want 1", c.mode, n)
			}
			if n := logs.count("receives no notifications"); n != c.warning {
				t.Errorf("the warning about notifications was logged %d times, want %d", n, c.warning)
			}
		})
	}
}
