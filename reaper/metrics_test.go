package reaper_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"

	"github.com/sqllock/sqllock/internal/metrics"
	"github.com/sqllock/sqllock/internal/metrics/metricstest"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/reaper"
)

// TestMetrics reads a sweep's metrics back: the rows it deleted, by table,
// and the sweep by outcome. rowlock's Locker has no meter provider of its
// own yet, so the reaper records through the global one, which this test
// sets (for the rest of this test binary too: no test here runs in
// parallel with it).
func TestMetrics(t *testing.T) {
	read := metricstest.New(t)
	otel.SetMeterProvider(read.Provider)
	for _, shared := range testdb.Targets(t) {
		t.Run(shared.Name, func(t *testing.T) {
			tg := isolated(t, shared, false)
			before := read.Collect(t)
			prefix := testdb.Name(t) + "/"
			seedLapsed(t, tg, prefix, 250, time.Hour)
			r := newReaper(t, newLocker(t, tg.DB), reaper.WithGrace(0))
			res, err := r.RunOnce(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.Locks < 250 {
				t.Fatalf("swept %d lock rows, want at least the 250 seeded", res.Locks)
			}
			after := read.Collect(t)
			for _, c := range []struct {
				name string
				attr attribute.KeyValue
				want int64
			}{
				{metrics.NameReaperDeleted, metrics.KeyTable.String("locks"), int64(res.Locks)},
				{metrics.NameReaperDeleted, metrics.KeyTable.String("waiters"), int64(res.Waiters)},
				{metrics.NameReaperSweeps, metrics.KeySweepResult.String("swept"), 1},
				{metrics.NameReaperSweeps, metrics.KeySweepResult.String("failed"), 0},
			} {
				was, _ := before.Int(c.name, c.attr)
				now, _ := after.Int(c.name, c.attr)
				if now-was != c.want {
					t.Errorf("%s{%s} rose by %d, want %d", c.name, c.attr.Value.Emit(), now-was, c.want)
				}
			}
		})
	}
}
