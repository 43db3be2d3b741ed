package tickguard

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// TestAttribute: a fire is attributed to the activation nearest to it,
// early or late, for even and uneven gaps, and its window ends halfway to
// the activation after it. The fire times are given, not read from a clock.
func TestAttribute(t *testing.T) {
	parse := func(spec string) cron.Schedule {
		t.Helper()
		s, err := cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor).Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	at := func(clock string) time.Time {
		t.Helper()
		v, err := time.Parse("2006-01-02 15:04:05.000", "2025-01-02 "+clock)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		spec      string
		fired     string
		tick      string
		windowEnd string
	}{
		{"*/2 * * * * *", "03:04:06.000", "03:04:06.000", "03:04:07.000"},
		{"*/2 * * * * *", "03:04:06.700", "03:04:06.000", "03:04:07.000"}, // 0.7 s late
		{"*/2 * * * * *", "03:04:05.300", "03:04:06.000", "03:04:07.000"}, // 0.7 s early
		{"*/2 * * * * *", "03:04:06.999", "03:04:06.000", "03:04:07.000"},
		{"*/2 * * * * *", "03:04:07.001", "03:04:08.000", "03:04:09.000"},
		{"*/10 * * * * *", "03:04:13.000", "03:04:10.000", "03:04:15.000"}, // 3 s late
		{"*/10 * * * * *", "03:04:07.000", "03:04:10.000", "03:04:15.000"}, // 3 s early
		{"*/10 * * * * *", "03:04:14.900", "03:04:10.000", "03:04:15.000"},
		{"* * * * * *", "03:04:05.400", "03:04:05.000", "03:04:05.500"},
		{"0 * * * * *", "03:04:29.000", "03:04:00.000", "03:04:30.000"},
		{"0 * * * * *", "03:03:31.000", "03:04:00.000", "03:04:30.000"},
		// Uneven gaps: 9:00 and 17:00. 17:00 to 9:00 is 16 h, so its
		// window ends at 01:00; 9:00 to 17:00 is 8 h.
		{"0 0 9,17 * * *", "03:00:00.000", "09:00:00.000", "13:00:00.000"},
		{"0 0 9,17 * * *", "00:30:00.000", "2025-01-01 17:00", "01:00:00.000"},
		{"0 0 9,17 * * *", "12:59:00.000", "09:00:00.000", "13:00:00.000"},
		{"0 0 9,17 * * *", "13:01:00.000", "17:00:00.000", "2025-01-03 01:00"},
	}
	for _, c := range cases {
		s := parse(c.spec)
		tick, windowEnd, ok := Attribute(s.Next, at(c.fired))
		want, wantEnd := parseMaybeDay(t, c.tick), parseMaybeDay(t, c.windowEnd)
		if !ok || !tick.Equal(want) || !windowEnd.Equal(wantEnd) {
			t.Errorf("%q fired %s: tick %v, window end %v (ok %v); want %v, %v", c.spec, c.fired, tick, windowEnd, ok, want, wantEnd)
		}
	}
}

// parseMaybeDay reads "15:04:05.000" on 2025-01-02, or "2006-01-02 15:04".
func parseMaybeDay(t *testing.T, v string) time.Time {
	t.Helper()
	layout, prefix := "2006-01-02 15:04:05.000", "2025-01-02 "
	if len(v) == len("2006-01-02 15:04") {
		layout, prefix = "2006-01-02 15:04", ""
	}
	tm, err := time.Parse(layout, prefix+v)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestAttributeEdges: a schedule with no activation near the fire, one
// whose activations have ended, and one with a sub-second phase.
func TestAttributeEdges(t *testing.T) {
	fired := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	never := func(time.Time) time.Time { return time.Time{} }
	if _, _, ok := Attribute(never, fired); ok {
		t.Error("a schedule without activations: ok")
	}
	last := fired.Add(-time.Second)
	ended := func(t time.Time) time.Time {
		if t.Before(last) {
			return last
		}
		return time.Time{}
	}
	if tick, end, ok := Attribute(ended, fired); !ok || !tick.Equal(last) || !end.Equal(last.Add(lastHold)) {
		t.Errorf("the last activation: %v, %v, %v", tick, end, ok)
	}
	phase := fired.Add(300 * time.Millisecond)
	grid := func(t time.Time) time.Time { // every 2 s from phase
		n := t.Sub(phase).Truncate(2*time.Second) / (2 * time.Second)
		next := phase.Add(time.Duration(n) * 2 * time.Second)
		for !next.After(t) {
			next = next.Add(2 * time.Second)
		}
		for next.Add(-2 * time.Second).After(t) {
			next = next.Add(-2 * time.Second)
		}
		return next
	}
	if tick, end, ok := Attribute(grid, phase.Add(700*time.Millisecond)); !ok || !tick.Equal(phase) || !end.Equal(phase.Add(time.Second)) {
		t.Errorf("sub-second grid: %v, %v, %v; want %v", tick, end, ok, phase)
	}
}
