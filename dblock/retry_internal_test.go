package dblock

import (
	"testing"
	"time"
)

// TestRetryPauses: pauses double up to MaxBackoff (without a cap when it
// is 0, and without overflowing), and each is jittered between half of it
// and all of it.
func TestRetryPauses(t *testing.T) {
	for _, c := range []struct {
		r    Retry
		want []time.Duration
	}{
		{Retry{Backoff: 100 * time.Millisecond, MaxBackoff: time.Second}, []time.Duration{100, 200, 400, 800, 1000, 1000}},
		{Retry{Backoff: 100 * time.Millisecond}, []time.Duration{100, 200, 400, 800, 1600, 3200}},
		{Retry{Backoff: 100 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, []time.Duration{100, 100, 100}},
		{Retry{}, []time.Duration{0, 0, 0}},
	} {
		pause := c.r.Backoff
		for i, want := range c.want {
			if pause != want*time.Millisecond {
				t.Errorf("%+v: pause %d is %v, want %v", c.r, i+1, pause, want*time.Millisecond)
			}
			pause = c.r.next(pause)
		}
	}
	if got := (Retry{}).next(time.Duration(1<<62 + 1)); got <= 0 {
		t.Errorf("doubling past the largest Duration gave %v", got)
	}

	const d = time.Second
	seen := map[time.Duration]bool{}
	for range 100 {
		j := jitter(d)
		if j < d/2 || j > d {
			t.Fatalf("jitter(%v) = %v, want between %v and %v", d, j, d/2, d)
		}
		seen[j] = true
	}
	if len(seen) < 2 {
		t.Errorf("100 jittered pauses of %v were all %v", d, seen)
	}
	if jitter(0) != 0 {
		t.Errorf("jitter(0) = %v", jitter(0))
	}
}
