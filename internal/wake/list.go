package wake

import "sync"

// Waiter is one wait: an Acquire for a name, or a wait of a semaphore or a
// read/write lock for any of several names.
type Waiter struct {
	// wake holds at most one pending wake-up, so a release that happens
	// while the waiter is busy trying is not lost.
	wake chan struct{}
	// place is the waiter's place in the fair queue, nil when it has none
	// (yet); guarded by the List's mu.
	place Place
}

// Place is a waiter's place in a FIFO (a queue ticket): lower ids go
// first. A place that lapsed and was queued again has a new id.
type Place interface{ ID() int64 }

// C is where the waiter's wake-ups arrive.
func (w *Waiter) C() <-chan struct{} { return w.wake }

// Signal wakes w, or leaves it one pending wake-up if it is not asleep.
func (w *Waiter) Signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// List holds a Locker's waiters per name. Only the first of a name polls
// and is woken by releases: the others keep sleeping until their own
// timers, so a release costs one try per Locker, not one per waiter.
//
// The first is the waiter that can take the lock soonest: the fair waiter
// with the oldest place in the queue (the lowest id), or, when none has a
// place, the one that arrived first. Arrival order is not queue order: two
// goroutines may enqueue in the opposite order to their calls, and a
// waiter whose row lapsed is queued again at the tail. Were the first by
// arrival not the head of the queue, the head would sleep while the lock
// is free.
type List struct {
	// busy is told, under mu, when the list gains its first waiter (true)
	// and loses its last (false), so that the two never reach it out of
	// order. It must not take the list's lock.
	busy func(bool)

	mu     sync.Mutex
	byName map[string][]*Waiter // in arrival order
	total  int
}

// NewList returns an empty list that tells busy when it gains its first
// waiter and loses its last (busy may be nil).
func NewList(busy func(bool)) *List {
	return &List{busy: busy, byName: make(map[string][]*Waiter)}
}

// Add puts a new waiter on name's list and returns it.
func (l *List) Add(name string) *Waiter {
	w := &Waiter{wake: make(chan struct{}, 1)}
	l.AddUnder([]string{name}, w)
	return w
}

// NewWaiter returns a waiter on no list yet (see AddUnder).
func NewWaiter() *Waiter { return &Waiter{wake: make(chan struct{}, 1)} }

// AddUnder puts w on the list of each of names.
func (l *List) AddUnder(names []string, w *Waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, name := range names {
		l.byName[name] = append(l.byName[name], w)
		l.total++
		if l.total == 1 && l.busy != nil {
			l.busy(true)
		}
	}
}

// SetPlace records w's place in the queue. w may become the first; the
// waiter it displaces finds out at its next try.
func (l *List) SetPlace(w *Waiter, p Place) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w.place = p
}

// Remove takes w off name's list and wakes the new first waiter of the
// name, which from now on is the one that polls.
func (l *List) Remove(name string, w *Waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	list := l.byName[name]
	wasFirst := first(list) == w
	for i, other := range list {
		if other == w {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(l.byName, name)
	} else {
		l.byName[name] = list
	}
	l.total--
	if l.total == 0 && l.busy != nil {
		l.busy(false)
	}
	if wasFirst && len(list) > 0 {
		first(list).Signal()
	}
}

// RemoveUnder takes w off the list of each of names.
func (l *List) RemoveUnder(names []string, w *Waiter) {
	for _, name := range names {
		l.Remove(name, w)
	}
}

// IsFirst reports whether w is the waiter of name that polls.
func (l *List) IsFirst(name string, w *Waiter) bool {
	return l.FirstOfAny([]string{name}, w)
}

// FirstOfAny reports whether w is the waiter that polls for one of names.
func (l *List) FirstOfAny(names []string, w *Waiter) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, name := range names {
		if first(l.byName[name]) == w {
			return true
		}
	}
	return false
}

// WakeFirst wakes the waiter of name that polls, if any.
func (l *List) WakeFirst(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w := first(l.byName[name]); w != nil {
		w.Signal()
	}
}

// first is the waiter of list that polls: the one with the lowest place
// id, else the first to arrive. Ids are read afresh, since a waiter whose
// row lapsed gets a new one. Lists are short (the waiters of one name in
// one Locker), and it runs once per try, not per poll of the database.
func first(list []*Waiter) *Waiter {
	var best *Waiter
	var bestID int64
	for _, w := range list {
		if w.place == nil {
			continue
		}
		if id := w.place.ID(); best == nil || id < bestID {
			best, bestID = w, id
		}
	}
	if best == nil && len(list) > 0 {
		best = list[0]
	}
	return best
}
