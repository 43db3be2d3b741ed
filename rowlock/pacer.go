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
	switch {
	case notified && remaining > 0:
		pause = remaining + time.Millisecond
	default:
		pause = min(p.backoff, limit)
		p.backoff = min(2*p.backoff, limit)
		if remaining > 0 && remaining+time.Millisecond < pause {
			pause = remaining + time.Millisecond
		}
	}
	pause = min(pause, limit)
	// ±20% jitter keeps waiters of different processes from polling in step.
	return time.Duration(float64(pause) * (0.8 + 0.4*rand.Float64()))
}

func (p *pacer) reset() { p.backoff = p.minPoll }
