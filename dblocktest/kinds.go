package dblocktest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
)

// The lock kinds (semaphores, read/write locks) keep their holds in rows
// named as rowlock names them: the kind's name, U+241F, a suffix.
// Each row is a lock of its own, with its holder, token and MinHold, as a
// name of Acquire is; names a caller gives never contain the separator,
// so the rows of different kinds and names never meet.

// kindSeparator is the one rowlock uses.
const kindSeparator = lockinput.KindSeparator

// kindState is what the kinds keep beside their rows.
type kindState struct {
	// waiting counts the waiters of a kind (and of AcquireAll) by the
	// caller's name, for Locker.Waiting.
	waiting map[string]int
	// semLimits is the limit the holders of a semaphore use; it counts
	// only while one of its slots is held.
	semLimits map[string]int
	// lines are the fair waiters of each semaphore, oldest first.
	lines map[string][]*ticket
	// lastWriter is the token of the last writer admitted to each
	// read/write lock: its readers' token.
	lastWriter map[string]int64
}

func newKindState() kindState {
	return kindState{waiting: map[string]int{}, semLimits: map[string]int{}, lines: map[string][]*ticket{}, lastWriter: map[string]int64{}}
}

// rowsOfLocked returns the entries of name and of the rows derived from it.
func (l *Locker) rowsOfLocked(name string) map[string]*entry {
	rows := map[string]*entry{}
	for row, e := range l.names {
		if row == name || strings.HasPrefix(row, name+kindSeparator) {
			rows[row] = e
		}
	}
	return rows
}

// anyChangeLocked wakes the waiters of the kinds.
func (l *Locker) anyChangeLocked() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// rowFreeLocked reports whether row can be taken now by a new holder,
// and, when it is kept by MinHold only, how long until it can.
func (l *Locker) rowFreeLocked(row string) (free bool, pending time.Duration) {
	e := l.names[row]
	switch {
	case e == nil:
		return true, 0
	case e.holder != nil:
		return false, 0
	}
	if d := time.Until(e.minHoldUntil); d > 0 {
		return false, d
	}
	return true, 0
}

// heldByLocked reports whether owner holds row.
func (l *Locker) heldByLocked(row string, owner dblock.Owner) bool {
	e := l.names[row]
	return e != nil && e.holder != nil && e.holder.owner == owner
}

// giveBackLocked releases a hold a kind took and will not hand out.
func (l *Locker) giveBackLocked(k *Lock) {
	if k.released {
		return
	}
	k.released = true
	if k.err == nil {
		k.err = dblock.ErrReleased
		k.cancel(dblock.ErrReleased)
	}
	l.releaseLocked(k)
}

// kindCall checks what every acquisition of a kind checks, in rowlock's
// order: the context, the names (checkNames), the options. It returns the
// options, and ctx carrying the owner (a fresh one when ctx carries none:
// carried is false then).
func kindCall(ctx context.Context, opts []dblock.Option, checkNames func() error) (_ context.Context, _ dblock.Options, owner dblock.Owner, carried bool, err error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return nil, dblock.Options{}, dblock.Owner{}, false, fmt.Errorf("dblocktest: %w", err)
	}
	if err := checkNames(); err != nil {
		return nil, dblock.Options{}, dblock.Owner{}, false, err
	}
	o, err := lockinput.ResolveOptions(opts...)
	if err != nil {
		return nil, dblock.Options{}, dblock.Owner{}, false, err
	}
	owner, err = lockinput.OwnerFor(ctx)
	if err != nil {
		return nil, dblock.Options{}, dblock.Owner{}, false, err
	}
	if _, carried = dblock.OwnerFromContext(ctx); !carried {
		ctx = dblock.WithOwner(ctx, owner.ID)
	}
	return ctx, o, owner, carried, nil
}

// checkKindName checks the name of a lock kind, and that longest, the
// longest row it derives, fits in dblock.MaxNameLength, as rowlock does.
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

// step is one look of a kind's acquisition, run with l.mu held: done when
// it has a hold or an error; otherwise pending is how long until a row
// that blocks it is free by MinHold alone (0: no such row).
type step func() (done bool, pending time.Duration, err error)

// loop runs try until it is done or, with wait, ctx ends (the error joins
// dblock.ErrNotAcquired and ctx's); without wait it tries once and returns
// dblock.ErrNotAcquired. Between tries it waits for a change in the
// Locker. leave runs, with l.mu held, when a waiter gives up or is done.
func (l *Locker) loop(ctx context.Context, name string, wait bool, try step, leave func()) error {
	counted := false
	defer func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if counted {
			if l.kinds.waiting[name]--; l.kinds.waiting[name] == 0 {
				delete(l.kinds.waiting, name)
			}
		}
		if leave != nil {
			leave()
		}
		// A waiter that leaves may let the next fair one in.
		l.anyChangeLocked()
	}()
	if err := ctx.Err(); err != nil {
		return errors.Join(dblock.ErrNotAcquired, err)
	}
	for {
		l.mu.Lock()
		done, pending, err := try()
		if done || err != nil || !wait {
			l.mu.Unlock()
			if !done && err == nil {
				err = dblock.ErrNotAcquired
			}
			return err
		}
		if !counted {
			counted = true
			l.kinds.waiting[name]++
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		if err := l.wait(ctx, changed, pending); err != nil {
			return errors.Join(dblock.ErrNotAcquired, err)
		}
	}
}

// soonest returns the shorter positive of two pending durations.
func soonest(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

func rowName(name, suffix string, i int) string {
	return name + kindSeparator + suffix + strconv.Itoa(i)
}
