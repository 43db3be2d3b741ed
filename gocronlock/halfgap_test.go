package gocronlock

import (
	"testing"
	"time"
)

// TestHalfGap: the hold is FirstHold until a second run, then half the
// shortest gap seen, per job, so a replica that skipped runs (a longer
// gap) does not hold the lock into the next one.
func TestHalfGap(t *testing.T) {
	x := &Locker{runs: map[string]runHistory{}}
	t0 := time.Date(2025, 1, 2, 3, 4, 0, 0, time.UTC)
	steps := []struct {
		job   string
		fired time.Duration // after t0
		want  time.Duration
	}{
		{"a", 0, FirstHold},
		{"b", 0, FirstHold},
		{"a", 10 * time.Second, 5 * time.Second},
		{"a", 30 * time.Second, 5 * time.Second}, // a skipped run: the gap is 20 s
		{"b", 2 * time.Second, time.Second},
		{"a", 38 * time.Second, 4 * time.Second}, // a shorter gap wins
		{"a", 38 * time.Second, 4 * time.Second}, // a zero gap is no gap
	}
	for _, s := range steps {
		if got := x.halfGap(s.job, t0.Add(s.fired)); got != s.want {
			t.Errorf("job %s fired at +%v: hold %v, want %v", s.job, s.fired, got, s.want)
		}
	}
}
