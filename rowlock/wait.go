package rowlock

import (
	"math/rand/v2"
	"sync"
	"time"
)

// waiter is one Acquire call waiting for a name.
type waiter struct {
	// wake holds at most one pending wake-up, so a release that happens
	// while the waiter is busy trying is not lost.
	wake chan struct{}
}

// waitlist holds a Locker's waiters, per name in arrival order. A release
// wakes only the first: the others keep sleeping until their own timers, so
// a release costs one try per Locker, not one per waiter.
type waitlist struct {
	mu     sync.Mutex
	byName map[string][]*waiter
	total  int
	// onBusy and onIdle run (under mu) when the list gains its first waiter
	// and loses its last.
	onBusy, onIdle func()
}

func (wl *waitlist) add(name string) *waiter {
	w := &waiter{wake: make(chan struct{}, 1)}
	wl.mu.Lock()
	defer wl.mu.Unlock()
	if wl.byName == nil {
		wl.byName = make(map[string][]*waiter)
	}
	wl.byName[name] = append(wl.byName[name], w)
	wl.total++
	if wl.total == 1 && wl.onBusy != nil {
		wl.onBusy()
	}
	return w
}

// remove takes w off the list and wakes the new first waiter of the name,
// which from now on is the one that polls.
func (wl *waitlist) remove(name string, w *waiter) {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	list := wl.byName[name]
	wasFirst := len(list) > 0 && list[0] == w
	for i, other := range list {
		if other == w {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(wl.byName, name)
	} else {
		wl.byName[name] = list
	}
	wl.total--
	if wl.total == 0 && wl.onIdle != nil {
		wl.onIdle()
	}
	if wasFirst && len(list) > 0 {
		signal(list[0])
	}
}

// isFirst reports whether w is the longest-waiting waiter of name.
func (wl *waitlist) isFirst(name string, w *waiter) bool {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	list := wl.byName[name]
	return len(list) > 0 && list[0] == w
}

// wakeFirst wakes the longest-waiting waiter of name, if any.
func (wl *waitlist) wakeFirst(name string) {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	if list := wl.byName[name]; len(list) > 0 {
		signal(list[0])
	}
}

func signal(w *waiter) {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// busyLockers are the Lockers of this process that have waiters; a release
// wakes their first waiter of the name directly, without a round trip
// through the database. A Locker is here only while it has waiters, so an
// unclosed Locker is not kept alive by it.
var busyLockers = struct {
	sync.Mutex
	set map[*Locker]struct{}
}{set: make(map[*Locker]struct{})}

func wakeLocal(name string) {
	busyLockers.Lock()
	if len(busyLockers.set) == 0 {
		// The common, uncontended release: nobody waits in this process.
		busyLockers.Unlock()
		return
	}
	lockers := make([]*Locker, 0, len(busyLockers.set))
	for l := range busyLockers.set {
		lockers = append(lockers, l)
	}
	busyLockers.Unlock()
	for _, l := range lockers {
		l.waiters.wakeFirst(name)
	}
}

// pacer decides how long a waiter sleeps between tries.
type pacer struct {
	minPoll, maxPoll time.Duration
	backoff          time.Duration
}

// next returns the pause after a failed try. remaining is the holder's
// lease left (0 if unknown); notified is true when releases wake us, so
// polling is needed only for leases that lapse.
func (p *pacer) next(remaining time.Duration, notified bool) time.Duration {
	if p.backoff < p.minPoll {
		p.backoff = p.minPoll
	}
	var pause time.Duration
	switch {
	case notified && remaining > 0:
		pause = remaining + time.Millisecond
	default:
		pause = p.backoff
		p.backoff = min(2*p.backoff, p.maxPoll)
		if remaining > 0 && remaining+time.Millisecond < pause {
			pause = remaining + time.Millisecond
		}
	}
	pause = min(pause, p.maxPoll)
	// ±20% jitter keeps waiters of different processes from polling in step.
	return time.Duration(float64(pause) * (0.8 + 0.4*rand.Float64()))
}

func (p *pacer) reset() { p.backoff = p.minPoll }
