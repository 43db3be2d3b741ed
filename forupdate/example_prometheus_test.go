package forupdate_test

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

	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// The Locker's metrics exported to Prometheus with the OpenTelemetry
// Prometheus exporter: after a contended acquisition and a lost lock, the
// scrape shows them (the counters; the histograms are there too).
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

	locker, err := forupdate.New(db, forupdate.WithMeterProvider(provider))
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
	// Committing the lock's transaction behind Release's back loses the lock.
	_ = lock.(*forupdate.Lock).Tx().Commit()
	_ = lock.Release(ctx)

	scrape := httptest.NewRecorder()
	promhttp.HandlerFor(registry, promhttp.HandlerOpts{}).ServeHTTP(scrape, httptest.NewRequest("GET", "/metrics", nil))
	lines := bufio.NewScanner(scrape.Body)
	for lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, "sqllock_lock_acquisitions_total{") || strings.HasPrefix(line, "sqllock_lock_lost_total{") ||
			strings.HasPrefix(line, "sqllock_lock_hold_duration_seconds_count{") {
			fmt.Println(line)
		}
	}
	// Output:
	// sqllock_lock_acquisitions_total{sqllock_acquire_mode="try",sqllock_acquire_result="not_acquired",sqllock_lock_kind="forupdate",sqllock_lock_type="mutex"} 1
	// sqllock_lock_acquisitions_total{sqllock_acquire_mode="wait",sqllock_acquire_result="acquired",sqllock_lock_kind="forupdate",sqllock_lock_type="mutex"} 1
	// sqllock_lock_hold_duration_seconds_count{sqllock_lock_end="lost",sqllock_lock_kind="forupdate",sqllock_lock_type="mutex"} 1
	// sqllock_lock_lost_total{sqllock_lock_kind="forupdate",sqllock_lock_lost_cause="transaction_ended",sqllock_lock_type="mutex"} 1
}
