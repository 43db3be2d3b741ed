package rowlock

import (
	"sync"

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
	// sess is the Locker's session. It is told when the list gains its
	// first waiter and loses its last, under mu, so that the two never
	// reach it out of order.
	sess *session

	mu     sync.Mutex
	byName map[string][]*waiter // in arrival order
	total  int
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
	if wl.total == 1 {
		wl.busy()
	}
	return w
}

// setTicket records w's place in the queue. w may become the first; the
// waiter it displaces finds out at its next try (see waiting.pause).
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
	if wl.total == 0 {
		wl.idle()
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

// busy runs, under mu, when the list gains its first waiter: releases in
// this process wake it from now on, and the session stays up.
func (wl *waitlist) busy() {
	busyWaitlists.add(wl)
	if wl.sess != nil {
		wl.sess.setWaiting(true)
	}
}

// idle runs, under mu, when the list loses its last waiter.
func (wl *waitlist) idle() {
	busyWaitlists.remove(wl)
	if wl.sess != nil {
		wl.sess.setWaiting(false)
	}
}

// busyWaitlists are the waitlists of this process that have waiters; a
// release wakes their first waiter of the name directly, without a round
// trip through the database. It must span every Locker of the process, not
// one: a PostgreSQL release sends no NOTIFY when all the waiters that asked
// for one are in this process (see pgRelease), so a waiter of another Locker
// here hears of the release only through it. A waitlist is here only while
// it has waiters, so an unclosed Locker is not kept alive by it.
var busyWaitlists = waitlists{set: make(map[*waitlist]struct{})}

// waitlists is a set of waitlists.
type waitlists struct {
	mu  sync.Mutex
	set map[*waitlist]struct{}
}

func (s *waitlists) add(wl *waitlist) {
	s.mu.Lock()
	s.set[wl] = struct{}{}
	s.mu.Unlock()
}

func (s *waitlists) remove(wl *waitlist) {
	s.mu.Lock()
	delete(s.set, wl)
	s.mu.Unlock()
}

// wakeFirst wakes the first waiter of name in every waitlist of the set.
func (s *waitlists) wakeFirst(name string) {
	s.mu.Lock()
	if len(s.set) == 0 {
		// The common, uncontended release: nobody waits in this process.
		s.mu.Unlock()
		return
	}
	// Woken outside mu: a waitlist takes mu while it holds its own lock
	// (busy, idle), so taking a waitlist's lock under mu could deadlock.
	lists := make([]*waitlist, 0, len(s.set))
	for wl := range s.set {
		lists = append(lists, wl)
	}
	s.mu.Unlock()
	for _, wl := range lists {
		wl.wakeFirst(name)
	}
}
