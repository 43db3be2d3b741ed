package dblocktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
)

// Locker is a dblock.Locker that keeps its locks in memory, for the unit
// tests of code that takes locks. It behaves as rowlock's Locker does as
// seen through dblock (the same validation and errors, reentrancy by owner,
// tokens, Fair, MinHold) and passes TestLocker; a test makes a held lock
// lapse or be lost with Lapse and Lose. It has rowlock's lock kinds too,
// with rowlock's methods, rules and errors: Semaphore, Readers and
// Writers, AcquireAll and TryAcquireAll. Unlike rowlock, a semaphore
// hands out the lowest free slot, not a random one.
//
// A Locker is one lock space, as one database is: code that stands for
// several replicas in a test shares one Locker, and each replica's
// acquisitions are told apart by their owners. Make a new Locker per test.
// Leases never lapse on their own: a hold lasts until Release, Lapse or
// Lose, whatever its TTL, which is validated and otherwise ignored. It
// starts no goroutine. It is safe for concurrent use.
type Locker struct {
	mu        sync.Mutex
	names     map[string]*entry // by row: a name, or a row a lock kind derives from one
	lastToken int64
	kinds     kindState
	// changed is closed at every change that may let a waiter of a lock
	// kind in (they wait on several rows); nil until someone waits.
	changed chan struct{}
}

// entry is the state of one name.
type entry struct {
	holder *holder // nil when no one holds the name
	// minHoldUntil keeps the name taken, by nobody, after its last hold
	// was released early (dblock.MinHold).
	minHoldUntil time.Time
	// queue holds the fair waiters, oldest first.
	queue []*ticket
	// waiting counts the Acquire calls waiting for the name, fair or not.
	waiting int
	// changed is closed at every change that may let a waiter in; nil
	// until someone waits.
	changed chan struct{}
}

// holder is the owner holding a name, and its live holds.
type holder struct {
	owner dblock.Owner
	token int64
	locks []*Lock
}

// ticket is a fair waiter's place in a queue. Not of size zero: pointers
// to distinct zero-size values may compare equal.
type ticket struct{ _ byte }

// Causes of a lost lock that Lapse and Lose give; a Lock's Err wraps
// dblock.ErrLockLost and one of them.
var (
	errLapsed = errors.New("its lease lapsed (Locker.Lapse)")
	errLost   = errors.New("lost on demand (Locker.Lose)")
)

// NewLocker returns an empty in-memory Locker.
func NewLocker() *Locker {
	return &Locker{names: make(map[string]*entry), kinds: newKindState()}
}

// Acquire waits until name is held or ctx ends, as dblock.Locker says;
// with dblock.Fair it queues behind earlier fair waiters. When ctx ends
// first the error joins dblock.ErrNotAcquired and ctx.Err(). Errors:
// dblock.ErrInvalidName, dblock.ErrInvalidOption (a nil ctx among them).
func (l *Locker) Acquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return l.acquire(ctx, name, opts, true)
}

// TryAcquire takes name if it is free (and no fair waiter is queued for
// it) or already held by the owner in ctx; otherwise it returns
// dblock.ErrNotAcquired at once. Errors as Acquire.
func (l *Locker) TryAcquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return l.acquire(ctx, name, opts, false)
}

// Held reports whether name is held now: the lock of that name, a permit
// of the semaphore, or the read/write lock of that name (by a reader, a
// writer, or a writer waiting for readers to leave). A lock released
// early and kept taken by MinHold is not held.
func (l *Locker) Held(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.rowsOfLocked(name) {
		if e.holder != nil {
			return true
		}
	}
	return false
}

// Waiting returns how many Acquire calls are waiting for name now: a test
// waits for it to grow before it makes the holder release, lapse or lose
// the lock, to know the waiter is waiting.
//
// It counts the waiters of every kind of that name: Acquire's, the
// semaphore's, the read/write lock's, and AcquireAll's waiting for it.
func (l *Locker) Waiting(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.kinds.waiting[name]
	if e := l.names[name]; e != nil {
		n += e.waiting
	}
	return n
}

// Lapse ends name's lease now, as if its holder had stopped renewing it
// for a whole TTL: every hold of the name is lost (Done closed, Context
// canceled, Err wrapping dblock.ErrLockLost), and the name is free for the
// next acquirer. A lock released early and kept taken by MinHold is freed
// too. It reports whether the name was held or kept.
//
// It ends the holds of every kind of that name: the lock, every permit of
// the semaphore, every read and write hold of the read/write lock. A
// writer waiting for readers to leave holds the writer's place: its
// Acquire fails with an error wrapping dblock.ErrLockLost, as rowlock's
// does when its writer row is lost while it waits.
func (l *Locker) Lapse(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := false
	now := time.Now()
	for row, e := range l.rowsOfLocked(name) {
		changed = changed || e.holder != nil || now.Before(e.minHoldUntil)
		l.loseLocked(row, e, errLapsed)
	}
	return changed
}

// Lose makes every hold of name lost with cause (a driver error, say, or
// dblock.ErrReadOnly; nil gives a cause of the package's own), as a holder
// that cannot renew declares: Done is closed, Context canceled with the
// error, and Err wraps dblock.ErrLockLost and cause. The name is free for
// the next acquirer at once. It reports whether the name was held. As
// Lapse, it ends the holds of every kind of that name.
func (l *Locker) Lose(name string, cause error) bool {
	if cause == nil {
		cause = errLost
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lost := false
	for row, e := range l.rowsOfLocked(name) {
		if e.holder != nil {
			lost = true
			l.loseLocked(row, e, cause)
		}
	}
	return lost
}

// loseLocked ends every hold of name with cause and frees it.
func (l *Locker) loseLocked(name string, e *entry, cause error) {
	if e.holder != nil {
		err := fmt.Errorf("dblocktest: %q: %w: %w", name, dblock.ErrLockLost, cause)
		for _, k := range e.holder.locks {
			k.err = err
			k.cancel(err)
		}
		e.holder = nil
	}
	e.minHoldUntil = time.Time{}
	l.changedLocked(name, e)
}

// acquire is Acquire and TryAcquire. Its complexity (over 15) is the
// in-memory protocol in one place under one mutex: re-entry, a free or
// lapsed entry, the fair queue and MinHold.
func (l *Locker) acquire(ctx context.Context, name string, opts []dblock.Option, wait bool) (dblock.Lock, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return nil, fmt.Errorf("dblocktest: %w", err)
	}
	// The name first: a call with a bad name and a bad option reports the
	// name, as the database Lockers do.
	if err := lockinput.ValidateCallerName(name); err != nil {
		return nil, err
	}
	o, err := lockinput.ResolveOptions(opts...)
	if err != nil {
		return nil, err
	}
	owner, err := lockinput.OwnerFor(ctx)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dblocktest: %q: %w", name, errors.Join(dblock.ErrNotAcquired, err))
	}
	var place *ticket
	waiting := false
	for {
		l.mu.Lock()
		k := l.takeLocked(ctx, name, owner, o, place)
		e := l.names[name]
		if k != nil || !wait {
			if waiting {
				e.waiting--
			}
			l.mu.Unlock()
			if k == nil {
				return nil, fmt.Errorf("dblocktest: %q: %w", name, dblock.ErrNotAcquired)
			}
			return k, nil
		}
		if !waiting {
			waiting = true
			e.waiting++
		}
		if o.Fair && place == nil {
			place = new(ticket)
			e.queue = append(e.queue, place)
		}
		changed := e.waitLocked()
		var pending time.Duration
		if e.holder == nil && !e.minHoldUntil.IsZero() {
			pending = time.Until(e.minHoldUntil)
		}
		l.mu.Unlock()
		if err := l.wait(ctx, changed, pending); err != nil {
			l.leave(name, place)
			return nil, fmt.Errorf("dblocktest: %q: %w", name, errors.Join(dblock.ErrNotAcquired, err))
		}
	}
}

// wait returns when changed is closed or the pending MinHold has passed
// (nil), or when ctx ends (its error).
func (l *Locker) wait(ctx context.Context, changed <-chan struct{}, pending time.Duration) error {
	var timeUp <-chan time.Time
	if pending > 0 {
		timer := time.NewTimer(pending)
		defer timer.Stop()
		timeUp = timer.C
	}
	select {
	case <-changed:
	case <-timeUp:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// leave counts out a waiter that gave up, and takes it out of name's
// queue. Its entry is there: one with waiters is never forgotten.
func (l *Locker) leave(name string, place *ticket) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.names[name]
	e.waiting--
	// The next waiter may be first now; and the entry may be forgotten.
	e.dequeue(place)
	l.changedLocked(name, e)
}

// takeLocked gives owner a hold of name if it may have one now: it holds
// the name already (reentry, past any queue), or the name is free, its
// MinHold has passed and no older fair waiter is queued (place is the
// caller's own ticket, if it has one). It returns nil otherwise.
func (l *Locker) takeLocked(ctx context.Context, name string, owner dblock.Owner, o dblock.Options, place *ticket) *Lock {
	e := l.names[name]
	if e == nil {
		e = &entry{}
		l.names[name] = e
	}
	now := time.Now()
	switch {
	case e.holder != nil && e.holder.owner == owner:
	case e.holder != nil, now.Before(e.minHoldUntil):
		return nil
	case len(e.queue) > 0 && e.queue[0] != place:
		return nil
	default:
		l.lastToken++
		e.holder = &holder{owner: owner, token: l.lastToken}
		e.dequeue(place)
	}
	if until := now.Add(o.MinHold); o.MinHold > 0 && until.After(e.minHoldUntil) {
		e.minHoldUntil = until
	}
	k := newLock(ctx, l, name, e.holder)
	e.holder.locks = append(e.holder.locks, k)
	return k
}

// releaseLocked ends hold k; the last hold frees the name (or leaves it
// to its MinHold).
func (l *Locker) releaseLocked(k *Lock) {
	e := l.names[k.name]
	if e == nil || e.holder == nil {
		return
	}
	for i, held := range e.holder.locks {
		if held == k {
			e.holder.locks = append(e.holder.locks[:i], e.holder.locks[i+1:]...)
			break
		}
	}
	if len(e.holder.locks) == 0 {
		e.holder = nil
		l.changedLocked(k.name, e)
	}
}

// changedLocked wakes name's waiters, and forgets the name when nothing is
// left of it.
func (l *Locker) changedLocked(name string, e *entry) {
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
	l.anyChangeLocked()
	if e.holder == nil && e.waiting == 0 && len(e.queue) == 0 && !time.Now().Before(e.minHoldUntil) {
		delete(l.names, name)
	}
}

// waitLocked returns the channel closed at name's next change.
func (e *entry) waitLocked() <-chan struct{} {
	if e.changed == nil {
		e.changed = make(chan struct{})
	}
	return e.changed
}

// dequeue removes place from the queue and reports whether it was there.
func (e *entry) dequeue(place *ticket) bool {
	for i, p := range e.queue {
		if p == place {
			e.queue = append(e.queue[:i], e.queue[i+1:]...)
			return true
		}
	}
	return false
}
