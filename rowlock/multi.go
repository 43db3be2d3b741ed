package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/clock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/metrics"
)

// AcquireAll takes every one of names for one owner, or none: it waits
// until all are held, and when it fails (ctx ends, an error) it releases
// what it had taken and returns with nothing held.
//
// Names are taken one by one in a canonical order (sorted by bytes,
// duplicates dropped), each as Acquire takes a name, with opts applied to
// each. Callers that ask for overlapping sets, in whatever order they list
// them, all take the shared names in that one order, so they never
// deadlock: as long as every caller that holds several of these names at
// once takes them with AcquireAll. While it waits for a name, AcquireAll
// holds the names before it in that order (their leases are renewed): a
// caller that waits for every name to be free at the same moment could
// wait forever behind callers of smaller sets.
//
// The owner is the one ctx carries, or one fresh owner for all the names;
// a name the owner holds already is re-entered, as by Acquire.
//
// Errors: as Acquire's; with no names, dblock.ErrInvalidOption; any
// invalid name is reported before anything is taken. When ctx ends first,
// the error joins dblock.ErrNotAcquired and ctx.Err(). If a name taken
// early was lost while a later one was awaited, the error wraps
// dblock.ErrLockLost; nothing is held then either. Giving back what was
// taken runs even when ctx has ended (for at most 10 s); should it fail,
// those names lapse within their TTL, since their renewal has stopped.
func (l *Locker) AcquireAll(ctx context.Context, names []string, opts ...dblock.Option) (*MultiLock, error) {
	return l.acquireAll(ctx, names, opts, true)
}

// TryAcquireAll takes every one of names, in the canonical order, if each
// is free (or held by the owner in ctx already), and otherwise returns an
// error wrapping dblock.ErrNotAcquired, naming the first name found held,
// with nothing held: what it had taken is released before it returns.
// Other errors as AcquireAll.
func (l *Locker) TryAcquireAll(ctx context.Context, names []string, opts ...dblock.Option) (*MultiLock, error) {
	return l.acquireAll(ctx, names, opts, false)
}

func (l *Locker) acquireAll(ctx context.Context, names []string, opts []dblock.Option, wait bool) (_ *MultiLock, err error) {
	// Options are checked once, before anything is taken: a bad option
	// must not fail half-way through the names.
	var set []string
	_, err = l.checkKindCall(ctx, opts, func() (err error) {
		set, err = canonicalNames(names)
		return err
	})
	if err != nil {
		return nil, err
	}
	ctx, owner, carried, err := withOneOwner(ctx)
	if err != nil {
		return nil, err
	}
	in := l.metrics.As(metrics.TypeMulti)
	started := clock.Now()
	defer func() { recordKind(ctx, in, wait, err, started) }()
	// What an owner from ctx holds already is re-entered, and must not be
	// dropped if a try's outcome is unknown (see takeRow).
	preheld := map[string]bool{}
	if carried {
		if preheld, err = l.kinds().ownerHolds(ctx, set, owner); err != nil {
			return nil, cutShort(ctx, lockkit.WrapDBError("rowlock: AcquireAll", err))
		}
	}
	taken := make([]*Lock, 0, len(set))
	for _, name := range set {
		mode := takeNow
		if wait {
			mode = takeWait
		}
		k, err := l.takeRow(ctx, name, opts, mode, owner, preheld[name], in)
		if err != nil {
			l.giveBack(ctx, taken)
			if !wait && errors.Is(err, dblock.ErrNotAcquired) {
				err = fmt.Errorf("rowlock: %q is held: %w", name, err)
			}
			return nil, err
		}
		taken = append(taken, k)
	}
	// A name taken early may have been lost while a later one was awaited
	// (its session connection failed, its renewals kept failing).
	for _, k := range taken {
		if err := k.Err(); err != nil {
			l.giveBack(ctx, taken)
			return nil, fmt.Errorf("rowlock: AcquireAll: %w", err)
		}
	}
	return newMultiLock(ctx, set, taken, owner), nil
}

// canonicalNames checks names and returns them sorted by bytes, without
// duplicates: the one order in which every caller takes them.
func canonicalNames(names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, &dblock.OptionError{Option: "names", Reason: "no names"}
	}
	for _, name := range names {
		if err := lockinput.ValidateCallerName(name); err != nil {
			return nil, err
		}
	}
	set := slices.Clone(names)
	slices.Sort(set)
	return slices.Compact(set), nil
}

var (
	_ dblock.Lock   = (*MultiLock)(nil)
	_ dblock.Fencer = (*MultiLock)(nil)
)

// MultiLock is a hold of several names by one owner, taken by AcquireAll
// or TryAcquireAll. Each name is a lock row of its own, with its own lease
// (renewed in the background) and fencing token; the MultiLock is held
// while all of them are, and lost as soon as any is. It is safe for
// concurrent use.
type MultiLock struct {
	names []string // canonical order
	locks []*Lock  // one per name, in names' order
	owner dblock.Owner

	ctx    context.Context
	cancel context.CancelCauseFunc
	// stops unhooks the watches on the members' contexts.
	stops []func() bool

	mu       sync.Mutex
	err      error // nil while held
	released bool
	// releasing: a Release runs; releaseTried: one ran (and failed, if
	// released is not set).
	releasing, releaseTried bool
}

func newMultiLock(ctx context.Context, names []string, locks []*Lock, owner dblock.Owner) *MultiLock {
	// Like a Lock's, the context outlives the acquisition's (often a
	// timeout) and carries the owner, so acquiring with it re-enters.
	mctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	m := &MultiLock{names: names, locks: locks, owner: owner, ctx: mctx, cancel: cancel}
	m.stops = make([]func() bool, len(locks))
	m.watchMembers()
	return m
}

// watchMembers hooks memberEnded on the members' contexts.
func (m *MultiLock) watchMembers() {
	for i, k := range m.locks {
		// AfterFunc starts no goroutine until the member's context ends.
		m.stops[i] = context.AfterFunc(k.Context(), func() { m.memberEnded(k) })
	}
}

// memberEnded runs when a member's context ends: it was lost (a member
// is released only by Release, which unhooks this first).
func (m *MultiLock) memberEnded(k *Lock) {
	if err := k.Err(); errors.Is(err, dblock.ErrLockLost) {
		m.lose(err)
	}
}

// lose marks the MultiLock lost with cause (which wraps dblock.ErrLockLost
// and names the member), unless it was released or lost already.
func (m *MultiLock) lose(cause error) {
	m.mu.Lock()
	if m.released || m.err != nil {
		m.mu.Unlock()
		return
	}
	m.err = cause
	m.mu.Unlock()
	m.cancel(cause)
}

// Name is the names, in canonical order, joined by commas: for logs. Names
// gives them exactly.
func (m *MultiLock) Name() string { return strings.Join(m.names, ",") }

// Names are the names held, in canonical order (sorted by bytes, without
// duplicates).
func (m *MultiLock) Names() []string { return slices.Clone(m.names) }

// Tokens are the names' fencing tokens, in the order of Names. Each grows
// strictly from holder to holder of its name: fence the writes to a
// resource guarded by one name with that name's token.
func (m *MultiLock) Tokens() []int64 {
	tokens := make([]int64, len(m.locks))
	for i, k := range m.locks {
		tokens[i] = k.Token()
	}
	return tokens
}

// Token is the largest of Tokens. It grows strictly from holder to holder
// of the same set of names (each of the set's tokens does); holders of
// different sets that share a name are ordered only by that name's own
// token (see Tokens).
func (m *MultiLock) Token() int64 { return slices.Max(m.Tokens()) }

// Owner is who holds the names.
func (m *MultiLock) Owner() dblock.Owner { return m.owner }

// Context carries the owner and is canceled when the names are released or
// any of them is lost; context.Cause tells which.
func (m *MultiLock) Context() context.Context { return m.ctx }

// Done is closed when the names are released or any of them is lost.
func (m *MultiLock) Done() <-chan struct{} { return m.ctx.Done() }

// Err is nil while every name is held, then dblock.ErrReleased, or an error
// wrapping dblock.ErrLockLost that names the first name found lost. Like
// Lock.Err, it checks each name's renewal deadline against the clock
// itself.
func (m *MultiLock) Err() error {
	m.mu.Lock()
	err, done := m.err, m.released || m.releasing
	m.mu.Unlock()
	if err != nil || done {
		return err
	}
	for _, k := range m.locks {
		if err := k.Err(); err != nil {
			m.lose(err)
			return m.Err()
		}
	}
	return nil
}

// Refresh renews every name's lease now, in canonical order. Errors as
// Lock.Refresh's; the first stops it, and one wrapping dblock.ErrLockLost
// marks the MultiLock lost.
func (m *MultiLock) Refresh(ctx context.Context) error {
	if err := lockinput.CheckContext(ctx); err != nil {
		return fmt.Errorf("rowlock: Refresh: %w", err)
	}
	m.mu.Lock()
	released, lost := m.released, m.err
	m.mu.Unlock()
	switch {
	case released:
		return dblock.ErrNotHeld
	case lost != nil:
		return lost
	}
	for _, k := range m.locks {
		if err := k.Refresh(ctx); err != nil {
			if errors.Is(err, dblock.ErrLockLost) {
				m.lose(err)
			}
			return err
		}
	}
	return nil
}

// Release gives up every name, last first, each as Lock.Release does (a
// ctx that had ended already does not stop it). Errors: dblock.ErrNotHeld
// once released; otherwise the names' release errors joined (see
// Lock.Release), among them one wrapping dblock.ErrLockLost for each name
// that had been lost. Every name is released whatever the others' errors.
// When a name's release statement failed, the MultiLock stays releasable:
// call Release again, which releases the names still held.
func (m *MultiLock) Release(ctx context.Context) error {
	if err := lockinput.CheckContext(ctx); err != nil {
		return fmt.Errorf("rowlock: Release: %w", err)
	}
	m.mu.Lock()
	if m.released || m.releasing {
		m.mu.Unlock()
		return dblock.ErrNotHeld
	}
	m.releasing = true
	again := m.releaseTried
	m.releaseTried = true
	m.mu.Unlock()
	for _, stop := range m.stops {
		stop()
	}
	var errs []error
	pending := false
	for i := len(m.locks) - 1; i >= 0; i-- {
		err := m.locks[i].Release(ctx)
		switch {
		case again && errors.Is(err, dblock.ErrNotHeld):
			// Released by the Release that failed before.
		case err != nil && m.locks[i].releasable():
			pending = true
			errs = append(errs, err)
		default:
			errs = append(errs, err)
		}
	}
	m.mu.Lock()
	m.releasing = false
	if pending {
		m.mu.Unlock()
		// Held still: a member lost from now on loses it, as before.
		m.watchMembers()
		return errors.Join(errs...)
	}
	m.released = true
	if m.err == nil {
		m.err = dblock.ErrReleased
	}
	m.mu.Unlock()
	m.cancel(dblock.ErrReleased)
	return errors.Join(errs...)
}

// CheckHeld proves inside tx that every name is still held, as
// Lock.CheckHeld does for one, locking their rows in canonical order (so
// that two fenced transactions over overlapping sets do not deadlock).
// The first name not proven fails it with an error wrapping
// dblock.ErrLockLost.
func (m *MultiLock) CheckHeld(ctx context.Context, tx *sql.Tx) error {
	for _, k := range m.locks {
		if err := k.CheckHeld(ctx, tx); err != nil {
			return err
		}
	}
	return nil
}
