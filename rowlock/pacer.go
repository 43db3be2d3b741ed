package rowlock

import (
	"math/rand/v2"
	"time"
)

// pacer decides how long a waiter sleeps between tries.
type pacer struct {
	minPoll, maxPoll  time.Duration
	maxPollUnnotified time.Duration // the cap when releases are not notified
	backoff           time.Duration
}

// next returns the pause after a failed try. remaining is the holder's
// lease left (0 if unknown); notified is true when releases wake us, so
// polling is needed only for leases that lapse.
func (p *pacer) next(remaining time.Duration, notified bool) time.Duration {
	if p.backoff < p.minPoll {
		p.backoff = p.minPoll
	}
	limit := p.maxPoll
	if !notified {
		limit = p.maxPollUnnotified
	}
	var pause time.Duration
	untilLapse := false // the pause ends just after the holder's lease
	switch {
	case notified && remaining > 0:
		pause, untilLapse = remaining+time.Millisecond, true
	default:
		pause = min(p.backoff, limit)
		p.backoff = min(2*p.backoff, limit)
		if remaining > 0 && remaining+time.Millisecond < pause {
			pause, untilLapse = remaining+time.Millisecond, true
		}
	}
	if pause > limit {
		pause, untilLapse = limit, false
	}
	// Jitter keeps waiters of different processes from polling in step:
	// ±20%, but only ever longer for a pause that waits out a lease. Cut
	// short, that pause would end in a try of a lock still held, and a
	// waiter that then asks for a wake-up finds the lease lapsed, arms
	// nothing, and has nothing left to wake it but its next poll.
	if untilLapse {
		return time.Duration(float64(pause) * (1 + 0.2*rand.Float64()))
	}
	return time.Duration(float64(pause) * (0.8 + 0.4*rand.Float64()))
}

func (p *pacer) reset() { p.backoff = p.minPoll }
