package rowlock_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/reaper"
	"github.com/sqllock/sqllock/rowlock"
)

// The Locker's metrics exported to Prometheus with the OpenTelemetry
// Prometheus exporter, after contention, a lock lost with its session
// (ended by the server, as a DBA or a failover would) and a reaper sweep:
// the scrape shows them (the counters here; the histograms and gauges are
// there too).
func Example_prometheus() {
	ctx := context.Background()
	db := testdb.ExampleDB()
	defer db.Close()
	if err := migrations.Up(ctx, db); err != nil {
		panic(err)
	}

	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo())
	if err != nil {
		panic(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer provider.Shutdown(ctx)

	locker, err := rowlock.New(db, rowlock.WithMeterProvider(provider))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	job := fmt.Sprintf("example/prometheus/%d", time.Now().UnixNano())
	lock, err := locker.Acquire(ctx, job)
	if err != nil {
		panic(err)
	}
	_, _ = locker.TryAcquire(ctx, job) // another owner: not acquired

	// End the holder's session from the server: its marker goes with it,
	// and the holder declares the lock lost.
	_, err = db.ExecContext(ctx, `
SELECT pg_terminate_backend(p.pid) FROM pg_locks p JOIN dblock_locks l
  ON p.classid = (l.session_key >> 32)::oid AND p.objid = (l.session_key & 4294967295)::oid
WHERE l.name = $1 AND p.locktype = 'advisory' AND p.objsubid = 1`, job)
	if err != nil {
		panic(err)
	}
	<-lock.Done()
	_ = lock.Release(ctx) // frees the row; returns the loss

	// The reaper takes its own lock (the try acquired below) to sweep.
	r, err := reaper.New(locker, reaper.WithLockName(job+"/reaper"))
	if err != nil {
		panic(err)
	}
	if _, err := r.RunOnce(ctx); err != nil {
		panic(err)
	}

	scrape := httptest.NewRecorder()
	promhttp.HandlerFor(registry, promhttp.HandlerOpts{}).ServeHTTP(scrape, httptest.NewRequest("GET", "/metrics", nil))
	lines := bufio.NewScanner(scrape.Body)
	for lines.Scan() {
		line := lines.Text()
		for _, prefix := range []string{"sqllock_lock_acquisitions_total{", "sqllock_lock_lost_total{", "sqllock_reaper_sweeps_total{"} {
			if strings.HasPrefix(line, prefix) {
				fmt.Println(line)
			}
		}
	}
	// Output:
	// sqllock_lock_acquisitions_total{sqllock_acquire_mode="try",sqllock_acquire_result="acquired",sqllock_lock_kind="rowlock",sqllock_lock_type="mutex"} 1
	// sqllock_lock_acquisitions_total{sqllock_acquire_mode="try",sqllock_acquire_result="not_acquired",sqllock_lock_kind="rowlock",sqllock_lock_type="mutex"} 1
	// sqllock_lock_acquisitions_total{sqllock_acquire_mode="wait",sqllock_acquire_result="acquired",sqllock_lock_kind="rowlock",sqllock_lock_type="mutex"} 1
	// sqllock_lock_lost_total{sqllock_lock_kind="rowlock",sqllock_lock_lost_cause="session_ended",sqllock_lock_type="mutex"} 1
	// sqllock_reaper_sweeps_total{sqllock_reaper_result="swept"} 1
}
