package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/clock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/metrics"
	"github.com/sqllock/sqllock/internal/queue"
)

// MaxSemaphoreLimit is the largest limit of Locker.Semaphore.
const MaxSemaphoreLimit = 1000

// kindSeparator joins a name to the suffix of the rows a lock kind derives
// from it: U+241F SYMBOL FOR UNIT SEPARATOR, printable, so the rows read
// well in listings (sqllock status), and unlikely in names. Names that
// contain it are refused with dblock.ErrInvalidName (by the Acquire and
// TryAcquire of every kind, and Holder): they could name another name's
// rows.
const kindSeparator = lockinput.KindSeparator

// slotName is the row of permit slot i of semaphore name.
func slotName(name string, i int) string { return name + kindSeparator + "s" + strconv.Itoa(i) }

// semaphore is what Locker.Semaphore returns.
type semaphore struct {
	l     *Locker
	limit int
}

var _ dblock.Semaphore = (*semaphore)(nil)

// Semaphore returns the semaphores of limit permits per name (1 to
// MaxSemaphoreLimit) of the Locker's database: counting semaphores across
// processes, each permit a lock of its own, whose Acquire and TryAcquire
// return a *Permit. It meets dblock.Semaphore's contract. The value is
// over the Locker and costs nothing to keep. Errors:
// dblock.ErrInvalidOption for a limit out of range.
//
// Each permit is one of Limit rows of the lock table (slots, named after
// the semaphore's name, U+241F (␟), "s" and the slot number), with its
// own lease, renewal, fencing token and session marker, exactly as a lock
// of Locker.Acquire: a holder that dies gives its permit back within the
// crash grace or its lease, and the reaper deletes lapsed slot rows. The
// limit its holders use is recorded in the table dblock_semaphores
// (migration 3): asking with another limit while others hold permits is
// dblock.ErrLimitMismatch; the limit changes only while no one else holds
// a permit of the name.
//
// An owner holds at most one permit of a name: acquiring again with a
// context whose owner holds one (the permit's Context, say) re-enters that
// permit, as Acquire re-enters a lock, instead of taking a second (which,
// at the limit, would wait forever for itself).
//
// Waiting: a waiter looks at every slot of the name with one statement,
// tries the free ones, and otherwise sleeps until a slot is released (in
// this process, or announced by NOTIFY on PostgreSQL), its holder's
// session ends, or the next poll, as Acquire's waiters do.
//
// With dblock.Fair, permits go in arrival order: a waiter that finds no
// permit it may take joins a line of its own for the name (the fair
// queue, package queue, under the name, U+241F and "q"), and takes
// a free slot only while fewer waiters are ahead of it than slots are
// free; a TryAcquire with Fair does the same without joining. Acquirers
// without Fair do not look at the line: give every acquirer of a name
// Fair if its permits must go in order.
//
// Errors of Acquire and TryAcquire: dblock.ErrLimitMismatch when name's
// holders use another limit; dblock.ErrInvalidName (a name too long to
// derive its slots' names from, too), dblock.ErrInvalidOption,
// dblock.ErrClosed, dblock.ErrSchemaMissing (migration 3 has not run), or a
// driver error; when ctx ends first, dblock.ErrNotAcquired joined with
// ctx.Err().
func (l *Locker) Semaphore(limit int) (dblock.Semaphore, error) {
	if err := lockinput.CheckLimit(limit, MaxSemaphoreLimit); err != nil {
		return nil, fmt.Errorf("rowlock: %w", err)
	}
	return &semaphore{l: l, limit: limit}, nil
}

// Limit is the number of permits per name.
func (s *semaphore) Limit() int { return s.limit }

// Acquire waits until it holds a permit of name or ctx ends (the error then
// joins dblock.ErrNotAcquired and ctx.Err()). The lock it returns is a
// *Permit. Errors: dblock.ErrLimitMismatch when name's holders use another
// limit; dblock.ErrInvalidName (a name too long to derive its slots' names
// from, too), dblock.ErrInvalidOption, dblock.ErrClosed,
// dblock.ErrSchemaMissing (migration 3 has not run), or a driver error. A
// slot taken and then lost before Acquire could return it (the limit's
// statements after the take stalled past its lease) makes it
// dblock.ErrLockLost, with nothing held.
func (s *semaphore) Acquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return asLock(s.acquire(ctx, name, opts, true))
}

// TryAcquire takes a permit of name if one is free (or the owner in ctx
// holds one), and returns dblock.ErrNotAcquired at once otherwise. Other
// errors as Acquire.
func (s *semaphore) TryAcquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return asLock(s.acquire(ctx, name, opts, false))
}

// acquire is Acquire and TryAcquire. Its complexity (over 15) is the
// set-up and the wait loop with the fair queue, which share one deferred
// clean-up.
func (s *semaphore) acquire(ctx context.Context, name string, opts []dblock.Option, wait bool) (p *Permit, err error) {
	o, err := s.l.checkKindCall(ctx, opts, func() error {
		return checkKindName(name, slotName(name, s.limit-1), "semaphore")
	})
	if err != nil {
		return nil, err
	}
	ctx, owner, carried, err := withOneOwner(ctx)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(dblock.ErrNotAcquired, err)
	}
	in := s.l.metrics.As(metrics.TypeSemaphore)
	started := clock.Now()
	defer func() { recordKind(ctx, in, wait, err, started) }()
	t := semTry{s: s, name: name, opts: opts, owner: owner, carried: carried, metrics: in, fair: o.Fair, wait: wait}
	t.slots = t.slotsOf(s.limit)
	var rw *waiter
	defer func() {
		if rw != nil {
			rw.end()
			if !t.fair { // the queue counts fair waiters
				in.Waiting(context.WithoutCancel(ctx), false, -1)
			}
		}
		t.leaveQueue(ctx)
		if err == nil && p != nil {
			// The limit's statements, and leaving the queue, ran after
			// the take.
			if err = s.l.lostBeforeReturned(ctx, "semaphore", name, p.Lock); err != nil {
				p = nil
			}
		}
	}()
	for {
		p, blockers, err := t.once(ctx)
		if err != nil || p != nil {
			return p, err
		}
		if !wait {
			return nil, dblock.ErrNotAcquired
		}
		if t.fair && t.ticket == nil {
			// In line from now on; the next look, at once, counts the
			// waiters ahead.
			if err := t.joinQueue(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if rw == nil {
			// Registered after the first look: a release in between is
			// seen by the next look, which comes at once.
			rw = s.l.newWaiter(t.slots)
			if !t.fair {
				in.Waiting(context.WithoutCancel(ctx), false, 1)
			}
			continue
		}
		if _, err := rw.wait(ctx, blockers); err != nil {
			return nil, err
		}
	}
}

// checkKindName checks the name of a lock kind, and that longest, the
// longest name of the rows it derives, fits in the table.
func checkKindName(name, longest, kind string) error {
	if err := lockinput.ValidateCallerName(name); err != nil {
		return err
	}
	if len(longest) > dblock.MaxNameLength {
		return &dblock.NameError{Name: name, Reason: fmt.Sprintf("too long for a %s: its rows' names would exceed %d bytes (at most %d bytes here)",
			kind, dblock.MaxNameLength, dblock.MaxNameLength-(len(longest)-len(name)))}
	}
	return nil
}

// semTry is one Acquire or TryAcquire of a permit.
type semTry struct {
	s       *semaphore
	name    string
	opts    []dblock.Option
	owner   dblock.Owner
	carried bool
	slots   []string
	// checked is set once the recorded limit has been compared after a
	// look that found every slot held.
	checked bool
	// metrics records the permits' holds.
	metrics *metrics.Instruments
	// fair: permits go in arrival order (semaphore_fair.go); ticket is the
	// waiter's place in line, once it has one.
	fair   bool
	ticket *queue.Ticket
	// wait: the acquisition waits (Acquire), rather than trying once.
	wait bool
}

// once looks at the slots and tries to take one: the owner's own, or a
// free one. It returns the permit, or the slots in the way.
//
// Its complexity (over 15) is the cases of one look at the slot rows, in
// the order the protocol tries them.
func (t *semTry) once(ctx context.Context) (*Permit, []blocker, error) {
	l := t.s.l
	rows, err := l.kinds().rows(ctx, t.slots)
	if err != nil {
		return nil, nil, cutShort(ctx, lockkit.WrapDBError("rowlock: semaphore "+strconv.Quote(t.name), err))
	}
	var free []int
	for i, slot := range t.slots {
		r, exists := rows[slot]
		switch {
		case t.carried && r.heldBy(t.owner):
			// One permit per owner: re-enter it.
			if p, err := t.take(ctx, i, true); p != nil || err != nil {
				return p, nil, err
			}
		case !exists || !r.live:
			free = append(free, i)
		}
	}
	if t.fair && len(free) > 0 {
		// The waiters ahead in line have the first claim on free slots.
		ahead, err := t.ahead(ctx)
		if err != nil {
			return nil, nil, err
		}
		if ahead >= len(free) {
			free = nil
		}
	}
	// In random order, so that contenders spread over the free slots.
	rand.Shuffle(len(free), func(a, b int) { free[a], free[b] = free[b], free[a] })
	for _, i := range free {
		if p, err := t.take(ctx, i, false); p != nil || err != nil {
			return p, nil, err
		}
	}
	if !t.checked {
		// Everything is held: by holders of another limit, maybe, which
		// it would be pointless to wait for.
		t.checked = true
		if err := t.checkLimit(ctx); err != nil {
			return nil, nil, err
		}
	}
	var blockers []blocker
	for _, slot := range t.slots {
		if r := rows[slot]; r.live {
			blockers = append(blockers, blocker{name: slot, h: r.holder})
		}
	}
	return nil, blockers, nil
}

// take tries slot i; nil and no error when someone else has it.
func (t *semTry) take(ctx context.Context, i int, ownerHeld bool) (*Permit, error) {
	l := t.s.l
	k, err := l.takeRow(ctx, t.slots[i], t.opts, tryMode(t.wait), t.owner, ownerHeld, t.metrics)
	switch {
	case err == nil:
	case errors.Is(err, dblock.ErrNotAcquired) && ctx.Err() == nil:
		return nil, nil
	default:
		return nil, cutShort(ctx, err)
	}
	var recorded, inUse int
	err = lockkit.RetryContentionUntilDone(ctx, func() (err error) {
		recorded, inUse, err = ensureLimit(ctx, l.runner(), l.kinds().limitSQL(), t.name, t.s.limit, t.slotsOf, t.slots[i])
		return err
	})
	if err == nil && recorded != t.s.limit {
		err = fmt.Errorf("rowlock: semaphore %q: %w: asked for %d permits, its holders use %d (%d held)",
			t.name, dblock.ErrLimitMismatch, t.s.limit, recorded, inUse)
	}
	if err != nil {
		l.giveBack(ctx, []*Lock{k})
		if errors.Is(err, dblock.ErrLimitMismatch) {
			return nil, err
		}
		return nil, cutShort(ctx, lockkit.WrapDBError("rowlock: semaphore "+strconv.Quote(t.name), err))
	}
	k.name = t.name
	return &Permit{Lock: k, slot: i}, nil
}

// slotsOf are the slots of name under a limit of n.
func (t *semTry) slotsOf(n int) []string {
	if n == len(t.slots) {
		return t.slots
	}
	slots := make([]string, n)
	for i := range slots {
		slots[i] = slotName(t.name, i)
	}
	return slots
}

// checkLimit fails with dblock.ErrLimitMismatch when the recorded limit is
// not the semaphore's.
func (t *semTry) checkLimit(ctx context.Context) error {
	var recorded int
	err := t.s.l.runner().QueryRowContext(ctx, t.s.l.kinds().limitSQL().read, t.name).Scan(&recorded)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return cutShort(ctx, lockkit.WrapDBError("rowlock: semaphore "+strconv.Quote(t.name), err))
	case recorded != t.s.limit:
		return fmt.Errorf("rowlock: semaphore %q: %w: asked for %d permits, its holders use %d",
			t.name, dblock.ErrLimitMismatch, t.s.limit, recorded)
	}
	return nil
}

var (
	_ dblock.Lock   = (*Permit)(nil)
	_ dblock.Fencer = (*Permit)(nil)
)

// Permit is one permit of a semaphore (Locker.Semaphore): a *Lock on one slot row, with its
// own lease, renewal and fencing token. Its Name is the semaphore's name.
// Its Token grows strictly from holder to holder of its slot (not across
// slots, whose holders do not exclude one another). Release gives the
// permit back (one hold of it, when re-entered). It is safe for
// concurrent use.
type Permit struct {
	*Lock
	slot int
}

// Slot is the permit's slot, 0 to the limit - 1: holders at the same time
// have different slots.
func (p *Permit) Slot() int { return p.slot }
