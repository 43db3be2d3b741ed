package lockkit_test

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/metrics"
	"github.com/sqllock/sqllock/internal/metrics/metricstest"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestReplicationToldOnce: a Locker tells once, by a log line and a
// metric, that its PostgreSQL primary has no synchronous standby (the
// machine's server has none), records "sync" and logs nothing when it has
// one (a primary of the test's own with synchronous_standby_names set),
// and says nothing on MySQL. Its first acquisitions run at once, so that
// "once" is tested under concurrency.
func TestReplicationToldOnce(t *testing.T) {
	type server struct {
		name string
		tg   testdb.Target
		db   *sql.DB
		want metrics.ReplicationMode // "" for nothing told
	}
	var servers []server
	for _, tg := range testdb.Targets(t) {
		want := metrics.ReplicationMode("")
		if tg.Dialect == dblock.Postgres {
			want = metrics.ReplicationAsync
		}
		servers = append(servers, server{tg.Name, tg, tg.DB, want})
	}
	if chosen(t, "postgres") {
		r := testdb.NewReplicated(t)
		servers = append(servers, server{"postgres-sync-standby", r.Target, syncPrimary(t, r), metrics.ReplicationSync})
	}
	lockers := []struct {
		name string
		open func(db *sql.DB, d dblock.Dialect, log *slog.Logger, mp metric.MeterProvider) (dblock.Locker, func(), error)
	}{
		{"rowlock", func(db *sql.DB, d dblock.Dialect, log *slog.Logger, mp metric.MeterProvider) (dblock.Locker, func(), error) {
			l, err := rowlock.New(db, rowlock.WithDialect(d), rowlock.WithLogger(log), rowlock.WithMeterProvider(mp))
			if err != nil {
				return nil, nil, err
			}
			return l, func() { _ = l.Close() }, nil
		}},
		{"forupdate", func(db *sql.DB, d dblock.Dialect, log *slog.Logger, mp metric.MeterProvider) (dblock.Locker, func(), error) {
			l, err := forupdate.New(db, forupdate.WithDialect(d), forupdate.WithLogger(log), forupdate.WithMeterProvider(mp))
			if err != nil {
				return nil, nil, err
			}
			return l, func() { _ = l.Close() }, nil
		}},
	}
	for _, s := range servers {
		for _, lk := range lockers {
			t.Run(s.name+"/"+lk.name, func(t *testing.T) {
				logs := &messages{}
				reader := metricstest.New(t)
				l, closeLocker, err := lk.open(s.db, s.tg.Dialect, slog.New(logs), reader.Provider)
				if err != nil {
					t.Fatal(err)
				}
				defer closeLocker()
				var wg sync.WaitGroup
				for i := range 4 {
					wg.Go(func() {
						name := testdb.Name(t) + "-" + string(rune('a'+i))
						for range 2 {
							k, err := l.TryAcquire(t.Context(), name)
							if err != nil {
								t.Errorf("TryAcquire(%q): %v", name, err)
								return
							}
							if err := k.Release(t.Context()); err != nil {
								t.Errorf("Release(%q): %v", name, err)
							}
						}
					})
				}
				wg.Wait()
				told := logs.count(lockkit.AsyncPrimaryMessage)
				if want := map[bool]int{true: 1}[s.want == metrics.ReplicationAsync]; told != want {
					t.Errorf("the log says %d times that the primary has no synchronous standby, want %d", told, want)
				}
				snap := reader.Collect(t)
				for _, mode := range []metrics.ReplicationMode{metrics.ReplicationAsync, metrics.ReplicationSync} {
					got, _ := snap.Int(metrics.NameReplication, metrics.KeyKind.String(lk.name), metrics.KeyReplication.String(string(mode)))
					want := map[bool]int64{true: 1}[s.want == mode]
					if got != want {
						t.Errorf("%s{%s} = %d, want %d", metrics.NameReplication, mode, got, want)
					}
				}
			})
		}
	}
}

// chosen reports whether the run tests dialect (SQLLOCK_TEST_DIALECTS).
func chosen(t *testing.T, dialect string) bool {
	for _, tg := range testdb.Targets(t) {
		if tg.Name == dialect {
			return true
		}
	}
	return false
}

// syncPrimary makes r's primary wait for its standby at every commit
// (any standby is synchronous: '*'), and returns a pool on the pair that
// was opened once the primary's sessions read the new setting.
func syncPrimary(t *testing.T, r *testdb.Replicated) *sql.DB {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, q := range []string{"ALTER SYSTEM SET synchronous_standby_names = '*'", "SELECT pg_reload_conf()"} {
		if _, err := r.Target.DB.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db := testdb.Open(t, r.Target, r.Target.DSN)
	for {
		var names string
		if err := db.QueryRowContext(ctx, "SELECT current_setting('synchronous_standby_names')").Scan(&names); err != nil {
			t.Fatalf("the primary's synchronous_standby_names: %v", err)
		}
		if names == "*" {
			return db
		}
		// The postmaster hands the reload to each session in its own time.
		select {
		case <-ctx.Done():
			t.Fatal("the primary never read synchronous_standby_names = '*'")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// messages is a slog.Handler that keeps every message.
type messages struct {
	mu   sync.Mutex
	msgs []string
}

func (m *messages) Enabled(context.Context, slog.Level) bool { return true }
func (m *messages) WithAttrs([]slog.Attr) slog.Handler       { return m }
func (m *messages) WithGroup(string) slog.Handler            { return m }

func (m *messages) Handle(_ context.Context, r slog.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.msgs = append(m.msgs, r.Message)
	return nil
}

// count returns how many messages contain s.
func (m *messages) count(s string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, msg := range m.msgs {
		if strings.Contains(msg, s) {
			n++
		}
	}
	return n
}
