package wake

import (
	"testing"
	"time"
)

// TestPauseNeverEndsBeforeTheLeaseLapses: a pause that waits out the
// holder's lease ends after it, whatever the jitter draws; cut short, the
// waiter would try a lock still held, find the lease lapsed when it then
// asks for a wake-up, and sleep until its next poll (up to an hour in
// TestWokenAcrossProcesses, where that made it hang about once in fifteen
// runs). Pauses that only poll keep their jitter both ways.
func TestPauseNeverEndsBeforeTheLeaseLapses(t *testing.T) {
	const draws = 2000
	for _, c := range []struct {
		name      string
		remaining time.Duration
		notified  bool
		min, max  time.Duration // the pause's bounds over all draws
	}{
		{"notified, lease left", 160 * time.Millisecond, true, 161 * time.Millisecond, 194 * time.Millisecond},
		{"polling, lease shorter than the poll", 3 * time.Millisecond, false, 4 * time.Millisecond, 5 * time.Millisecond},
		{"polling, poll shorter than the lease", time.Second, false, 8 * time.Millisecond, 12 * time.Millisecond},
		{"notified, lease beyond the cap", 2 * time.Hour, true, 48 * time.Minute, 72 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			lo, hi := time.Duration(1<<62), time.Duration(0)
			for range draws {
				p := Pacer{MinPoll: 10 * time.Millisecond, MaxPoll: time.Hour, MaxPollUnnotified: time.Hour}
				d := p.Next(c.remaining, c.notified)
				lo, hi = min(lo, d), max(hi, d)
			}
			if lo < c.min || hi > c.max {
				t.Errorf("pauses over %d draws: %v to %v, want within %v to %v", draws, lo, hi, c.min, c.max)
			}
		})
	}
}
