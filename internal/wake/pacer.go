package wake

import (
	"math/rand/v2"
	"time"
)

// Pacer decides how long a waiter sleeps between tries.
type Pacer struct {
	// MinPoll is the first pause of a waiter that polls, which doubles
	// at each try up to MaxPoll, or MaxPollUnnotified for a waiter that
	// no release wakes.
	MinPoll, MaxPoll  time.Duration
	MaxPollUnnotified time.Duration
	backoff           time.Duration
}

// Next returns the pause after a failed try. remaining is the holder's
// lease left (0 if unknown); notified is true when releases wake us, so
// polling is needed only for leases that lapse.
func (p *Pacer) Next(remaining time.Duration, notified bool) time.Duration {
	if p.backoff < p.MinPoll {
		p.backoff = p.MinPoll
	}
	limit := p.MaxPoll
	if !notified {
		limit = p.MaxPollUnnotified
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

// Reset starts the backoff again from MinPoll: the waiter was woken.
func (p *Pacer) Reset() { p.backoff = p.MinPoll }
