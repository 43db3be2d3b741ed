package rowlock

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sqllock/sqllock/internal/queue"
)

// waiter is one Acquire call waiting for a name.
type waiter struct {
	// wake holds at most one pending wake-up, so a release that happens
	// while the waiter is busy trying is not lost.
	wake chan struct{}
	// ticket is the waiter's place in the fair queue, nil when it has none
	// (yet); guarded by the waitlist's mu.
	ticket *queue.Ticket
}

// waitlist holds a Locker's waiters per name. Only the first of a name
// polls and is woken by releases: the others keep sleeping until their own
// timers, so a release costs one try per Locker, not one per waiter.
//
// The first is the waiter that can take the lock soonest: the fair waiter
// with the oldest place in the queue (the lowest ticket id), or, when none
// has a ticket, the one that arrived first. Arrival order is not queue
// order: two goroutines may enqueue in the opposite order to their calls,
// and a waiter whose row lapsed is queued again at the tail. Were the first
// by arrival not the head of the queue, the head would sleep while the lock
// is free.
type waitlist struct {
	mu     sync.Mutex
	byName map[string][]*waiter // in arrival order
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

// setTicket records w's place in the queue. w may become the first; the
// waiter it displaces finds out at its next try (see Acquire).
func (wl *waitlist) setTicket(w *waiter, t *queue.Ticket) {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	w.ticket = t
}

// remove takes w off the list and wakes the new first waiter of the name,
// which from now on is the one that polls.
func (wl *waitlist) remove(name string, w *waiter) {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	list := wl.byName[name]
	wasFirst := first(list) == w
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
		signal(first(list))
	}
}

// isFirst reports whether w is the waiter of name that polls.
func (wl *waitlist) isFirst(name string, w *waiter) bool {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	return first(wl.byName[name]) == w
}

// wakeFirst wakes the waiter of name that polls, if any.
func (wl *waitlist) wakeFirst(name string) {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	if w := first(wl.byName[name]); w != nil {
		signal(w)
	}
}

// first is the waiter of list that polls: the one with the lowest ticket
// id, else the first to arrive. Ticket ids are read afresh, since a waiter
// whose row lapsed gets a new one. Lists are short (the waiters of one name
// in one process), and it runs once per try, not per poll of the database.
func first(list []*waiter) *waiter {
	var best *waiter
	var bestID int64
	for _, w := range list {
		if w.ticket == nil {
			continue
		}
		if id := w.ticket.ID(); best == nil || id < bestID {
			best, bestID = w, id
		}
	}
	if best == nil && len(list) > 0 {
		best = list[0]
	}
	return best
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
