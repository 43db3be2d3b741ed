// Package metricstest reads sqllock's metrics back in tests, through the
// OpenTelemetry SDK's manual reader. Only tests import it: the library
// itself depends on the metric API alone.
package metricstest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Reader is a meter provider whose measurements a test can collect.
type Reader struct {
	Provider *sdkmetric.MeterProvider
	reader   *sdkmetric.ManualReader
}

// New returns a Reader, shut down when the test ends.
func New(t testing.TB) *Reader {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return &Reader{Provider: mp, reader: r}
}

// Snapshot is one collection.
type Snapshot struct{ rm metricdata.ResourceMetrics }

// Collect reads every instrument now.
func (r *Reader) Collect(t testing.TB) Snapshot {
	t.Helper()
	var s Snapshot
	if err := r.reader.Collect(context.Background(), &s.rm); err != nil {
		t.Fatalf("metrics: collect: %v", err)
	}
	return s
}

// Int returns the value of the integer sum (counter or up-down counter)
// name at the data point whose attributes include attrs, and whether there
// is one.
func (s Snapshot) Int(name string, attrs ...attribute.KeyValue) (int64, bool) {
	var total int64
	found := false
	for _, sm := range s.rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range sum.DataPoints {
					if has(dp.Attributes, attrs) {
						total += dp.Value
						found = true
					}
				}
			}
		}
	}
	return total, found
}

// Count returns how many values the histogram name recorded at the data
// points whose attributes include attrs.
func (s Snapshot) Count(name string, attrs ...attribute.KeyValue) uint64 {
	var total uint64
	for _, sm := range s.rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok {
				for _, dp := range h.DataPoints {
					if has(dp.Attributes, attrs) {
						total += dp.Count
					}
				}
			}
		}
	}
	return total
}

// Unit returns the unit of the instrument name, "" when it is unknown.
func (s Snapshot) Unit(name string) string {
	for _, sm := range s.rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m.Unit
			}
		}
	}
	return ""
}

func has(set attribute.Set, attrs []attribute.KeyValue) bool {
	for _, a := range attrs {
		if v, ok := set.Value(a.Key); !ok || v != a.Value {
			return false
		}
	}
	return true
}

// Keys returns every attribute key of every data point, for tests that
// check no unbounded value (a lock name) is recorded.
func (s Snapshot) Keys() map[attribute.Key]bool {
	keys := map[attribute.Key]bool{}
	add := func(set attribute.Set) {
		for _, kv := range set.ToSlice() {
			keys[kv.Key] = true
		}
	}
	for _, sm := range s.rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					add(dp.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					add(dp.Attributes)
				}
			}
		}
	}
	return keys
}

// Want is what a test expects of the instrument Name at the data points
// whose attributes include Attrs: an integer sum's value (Int), or how many
// values a histogram recorded (Count).
type Want struct {
	Name  string
	Attrs []attribute.KeyValue
	Value int64
}

// Expect fails t (Errorf) for every want the snapshot does not meet.
func (s Snapshot) Expect(t testing.TB, wants []Want) {
	t.Helper()
	for _, w := range wants {
		// An instrument is a sum or a histogram: one of the two is 0.
		sum, _ := s.Int(w.Name, w.Attrs...)
		if got := sum + int64(s.Count(w.Name, w.Attrs...)); got != w.Value {
			t.Errorf("%s%v = %d, want %d", w.Name, w.Attrs, got, w.Value)
		}
	}
}
