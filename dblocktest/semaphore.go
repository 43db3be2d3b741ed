package dblocktest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
)

// MaxSemaphoreLimit is the largest limit of Locker.Semaphore, as rowlock's.
const MaxSemaphoreLimit = 1000

// semaphore is what Locker.Semaphore returns.
type semaphore struct {
	l     *Locker
	limit int
}

var _ dblock.Semaphore = (*semaphore)(nil)

// Semaphore returns the semaphores of limit permits per name (1 to
// MaxSemaphoreLimit), which meet dblock.Semaphore's contract as rowlock's
// do: each permit a lock of its own (a slot), with its
// own token, and one permit per owner (acquiring again with the permit's
// Context re-enters it). Asking with another limit than the holders of the
// name use is dblock.ErrLimitMismatch. With dblock.Fair, permits go in
// arrival order among fair acquirers. Errors: dblock.ErrInvalidOption for a
// limit out of range; of Acquire and TryAcquire, dblock.ErrLimitMismatch,
// dblock.ErrInvalidName, dblock.ErrInvalidOption, and
// dblock.ErrNotAcquired (joined with ctx.Err() when ctx ends first).
//
// Its names are their own namespace: semaphore "x" is not the lock "x" of
// Locker.Acquire. Locker.Lapse and Lose of a name end the permits of the
// semaphore of that name too.
func (l *Locker) Semaphore(limit int) (dblock.Semaphore, error) {
	if err := lockinput.CheckLimit(limit, MaxSemaphoreLimit); err != nil {
		return nil, fmt.Errorf("dblocktest: %w", err)
	}
	return &semaphore{l: l, limit: limit}, nil
}

// Limit is the number of permits per name.
func (s *semaphore) Limit() int { return s.limit }

// Acquire waits until it holds a permit of name or ctx ends (the error then
// joins dblock.ErrNotAcquired and ctx.Err()). The lock it returns is a
// *Permit. Errors: dblock.ErrLimitMismatch when name's holders use another
// limit; dblock.ErrInvalidName, dblock.ErrInvalidOption.
func (s *semaphore) Acquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return asLock(s.acquire(ctx, name, opts, true))
}

// TryAcquire takes a permit of name if one is free (or the owner in ctx
// holds one), and returns dblock.ErrNotAcquired at once otherwise. Other
// errors as Acquire.
func (s *semaphore) TryAcquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return asLock(s.acquire(ctx, name, opts, false))
}

func slotName(name string, i int) string { return rowName(name, "s", i) }

func (s *semaphore) acquire(ctx context.Context, name string, opts []dblock.Option, wait bool) (*Permit, error) {
	ctx, o, owner, carried, err := kindCall(ctx, opts, func() error {
		return checkKindName(name, slotName(name, s.limit-1), "semaphore")
	})
	if err != nil {
		return nil, err
	}
	l := s.l
	var p *Permit
	var place *ticket
	try := func() (bool, time.Duration, error) {
		var pending time.Duration
		p, pending, err = s.tryLocked(ctx, name, owner, carried, o, place, wait)
		if p == nil && err == nil && wait && o.Fair && place == nil {
			// In line from now on.
			place = new(ticket)
			l.kinds.lines[name] = append(l.kinds.lines[name], place)
		}
		return p != nil, pending, err
	}
	leave := func() {
		line := slices.DeleteFunc(l.kinds.lines[name], func(t *ticket) bool { return t == place })
		if len(line) == 0 {
			delete(l.kinds.lines, name)
		} else {
			l.kinds.lines[name] = line
		}
	}
	if err := l.loop(ctx, name, wait, try, leave); err != nil {
		return nil, fmt.Errorf("dblocktest: semaphore %q: %w", name, err)
	}
	return p, nil
}

// tryLocked takes a permit if it may: the owner's own, or a free slot
// (for a fair acquirer, only while fewer fair waiters are ahead of it than
// slots are free). It returns nil and how long until a slot kept by
// MinHold is free otherwise.
//
// Its complexity (over 15) is the protocol of one look, as Locker's
// acquire.
func (s *semaphore) tryLocked(ctx context.Context, name string, owner dblock.Owner, carried bool, o dblock.Options, place *ticket, wait bool) (*Permit, time.Duration, error) {
	l := s.l
	if recorded, ok := l.kinds.semLimits[name]; ok && recorded != s.limit {
		for i := range recorded {
			if e := l.names[slotName(name, i)]; e != nil && e.holder != nil {
				return nil, 0, fmt.Errorf("%w: asked for %d permits, its holders use %d", dblock.ErrLimitMismatch, s.limit, recorded)
			}
		}
	}
	if carried {
		for i := range s.limit {
			if row := slotName(name, i); l.heldByLocked(row, owner) {
				return s.permitLocked(ctx, name, i, owner, o), 0, nil
			}
		}
	}
	var free []int
	var pending time.Duration
	for i := range s.limit {
		ok, d := l.rowFreeLocked(slotName(name, i))
		if ok {
			free = append(free, i)
		}
		pending = soonest(pending, d)
	}
	if o.Fair {
		ahead := len(l.kinds.lines[name]) // all of them, for one not in line
		if i := slices.Index(l.kinds.lines[name], place); place != nil && i >= 0 {
			ahead = i
		}
		if ahead >= len(free) {
			return nil, pending, nil
		}
	}
	if len(free) == 0 {
		return nil, pending, nil
	}
	return s.permitLocked(ctx, name, free[0], owner, o), 0, nil
}

// permitLocked takes (or re-enters) slot i, which is free or owner's.
func (s *semaphore) permitLocked(ctx context.Context, name string, i int, owner dblock.Owner, o dblock.Options) *Permit {
	k := s.l.takeLocked(ctx, slotName(name, i), owner, o, nil)
	s.l.kinds.semLimits[name] = s.limit
	return &Permit{Lock: k, name: name, slot: i}
}

// Permit is one permit of a Semaphore: one slot held, with its own token.
// It implements dblock.Lock and dblock.Fencer, and is safe for concurrent
// use. The embedded Lock is its slot's hold: its Token, Owner, Context,
// Done, Err, Refresh, Release and CheckHeld are the permit's.
type Permit struct {
	*Lock
	name string
	slot int
}

var (
	_ dblock.Lock   = (*Permit)(nil)
	_ dblock.Fencer = (*Permit)(nil)
)

// Name is the semaphore's name (the embedded Lock's is its slot's).
func (p *Permit) Name() string { return p.name }

// Slot is the permit's slot, 0 to the limit - 1: holders at the same time
// have different slots.
func (p *Permit) Slot() int { return p.slot }

// asLock returns k as a dblock.Lock, nil (not a typed nil) on error.
func asLock[K dblock.Lock](k K, err error) (dblock.Lock, error) {
	if err != nil {
		return nil, err
	}
	return k, nil
}
