package dblocktest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
)

// AcquireAll takes every one of names for one owner, or none, as
// rowlock.Locker.AcquireAll does. Names are taken one by one in a
// canonical order (sorted by bytes, duplicates dropped), each as Acquire
// takes it, with opts applied to each. So callers of overlapping sets
// never deadlock. When it fails (ctx ends, an
// error) it releases what it had taken and returns with nothing held.
// The owner is the one ctx carries, or one fresh owner for all the names;
// a name the owner holds already is re-entered.
//
// Errors: as Acquire's; with no names, dblock.ErrInvalidOption; any
// invalid name is reported before anything is taken. When ctx ends first,
// the error joins dblock.ErrNotAcquired and ctx.Err(). If a name taken
// early was lost while a later one was awaited, the error wraps
// dblock.ErrLockLost.
func (l *Locker) AcquireAll(ctx context.Context, names []string, opts ...dblock.Option) (*MultiLock, error) {
	return l.acquireAll(ctx, names, opts, true)
}

// TryAcquireAll takes every one of names if each is free (or held by the
// owner in ctx already), and otherwise returns an error wrapping
// dblock.ErrNotAcquired, naming the first name found held, with nothing
// held. Other errors as AcquireAll.
func (l *Locker) TryAcquireAll(ctx context.Context, names []string, opts ...dblock.Option) (*MultiLock, error) {
	return l.acquireAll(ctx, names, opts, false)
}

func (l *Locker) acquireAll(ctx context.Context, names []string, opts []dblock.Option, wait bool) (*MultiLock, error) {
	var set []string
	ctx, _, owner, _, err := kindCall(ctx, opts, func() (err error) {
		set, err = canonicalNames(names)
		return err
	})
	if err != nil {
		return nil, err
	}
	taken := make([]*Lock, 0, len(set))
	giveBack := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, k := range slices.Backward(taken) {
			l.giveBackLocked(k)
		}
	}
	for _, name := range set {
		k, err := l.acquire(ctx, name, opts, wait)
		if err != nil {
			giveBack()
			if !wait && errors.Is(err, dblock.ErrNotAcquired) {
				err = fmt.Errorf("dblocktest: %q is held: %w", name, dblock.ErrNotAcquired)
			}
			return nil, err
		}
		taken = append(taken, k.(*Lock))
	}
	// A name taken early may have been lost (Lapse, Lose) while a later one
	// was awaited.
	for _, k := range taken {
		if err := k.Err(); err != nil {
			giveBack()
			return nil, fmt.Errorf("dblocktest: AcquireAll: %w", err)
		}
	}
	return newMultiLock(ctx, set, taken, owner), nil
}

// canonicalNames checks names and returns them sorted by bytes, without
// duplicates.
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

// MultiLock is a hold of several names by one owner, taken by AcquireAll
// or TryAcquireAll, as rowlock.MultiLock: each name a lock of its own with
// its own token; held while all of them are, lost as soon as any is. It
// implements dblock.Lock and dblock.Fencer, and is safe for concurrent
// use.
type MultiLock struct {
	names []string
	locks []*Lock
	owner dblock.Owner

	ctx    context.Context
	cancel context.CancelCauseFunc
	stops  []func() bool

	mu       sync.Mutex
	err      error // nil while held
	released bool
}

var (
	_ dblock.Lock   = (*MultiLock)(nil)
	_ dblock.Fencer = (*MultiLock)(nil)
)

func newMultiLock(ctx context.Context, names []string, locks []*Lock, owner dblock.Owner) *MultiLock {
	mctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	m := &MultiLock{names: names, locks: locks, owner: owner, ctx: mctx, cancel: cancel}
	for _, k := range locks {
		// A member's context ends when it is lost: Release unhooks this
		// before it releases them.
		m.stops = append(m.stops, context.AfterFunc(k.Context(), func() {
			if err := k.Err(); errors.Is(err, dblock.ErrLockLost) {
				m.lose(err)
			}
		}))
	}
	return m
}

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

// Name is the names, in canonical order, joined by commas.
func (m *MultiLock) Name() string { return strings.Join(m.names, ",") }

// Names are the names held, in canonical order.
func (m *MultiLock) Names() []string { return slices.Clone(m.names) }

// Tokens are the names' fencing tokens, in the order of Names.
func (m *MultiLock) Tokens() []int64 {
	tokens := make([]int64, len(m.locks))
	for i, k := range m.locks {
		tokens[i] = k.Token()
	}
	return tokens
}

// Token is the largest of Tokens.
func (m *MultiLock) Token() int64 { return slices.Max(m.Tokens()) }

// Owner is who holds the names.
func (m *MultiLock) Owner() dblock.Owner { return m.owner }

// Context carries the owner and is canceled when the names are released or
// any of them is lost.
func (m *MultiLock) Context() context.Context { return m.ctx }

// Done is closed when the names are released or any of them is lost.
func (m *MultiLock) Done() <-chan struct{} { return m.ctx.Done() }

// Err is nil while every name is held, then dblock.ErrReleased, or an
// error wrapping dblock.ErrLockLost that names the first name found lost.
func (m *MultiLock) Err() error {
	m.mu.Lock()
	err := m.err
	m.mu.Unlock()
	if err != nil {
		return err
	}
	for _, k := range m.locks {
		if err := k.Err(); errors.Is(err, dblock.ErrLockLost) {
			m.lose(err)
			return m.Err()
		}
	}
	return nil
}

// Refresh has no lease to renew. Errors: dblock.ErrNotHeld after Release,
// an error wrapping dblock.ErrLockLost once any name was lost.
func (m *MultiLock) Refresh(ctx context.Context) error {
	if err := lockinput.CheckContext(ctx); err != nil {
		return fmt.Errorf("dblocktest: Refresh: %w", err)
	}
	m.mu.Lock()
	released := m.released
	m.mu.Unlock()
	if released {
		return dblock.ErrNotHeld
	}
	if err := m.Err(); err != nil {
		return err
	}
	for _, k := range m.locks {
		if err := k.Refresh(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Release gives up every name, last first. Errors: dblock.ErrNotHeld once
// released; otherwise the names' release errors joined, among them one
// wrapping dblock.ErrLockLost for each name that had been lost.
func (m *MultiLock) Release(ctx context.Context) error {
	if err := lockinput.CheckContext(ctx); err != nil {
		return fmt.Errorf("dblocktest: Release: %w", err)
	}
	m.mu.Lock()
	if m.released {
		m.mu.Unlock()
		return dblock.ErrNotHeld
	}
	m.released = true
	if m.err == nil {
		m.err = dblock.ErrReleased
	}
	m.mu.Unlock()
	for _, stop := range m.stops {
		stop()
	}
	var errs []error
	for _, k := range slices.Backward(m.locks) {
		errs = append(errs, k.Release(ctx))
	}
	m.cancel(dblock.ErrReleased)
	return errors.Join(errs...)
}

// CheckHeld fails with an error wrapping dblock.ErrLockLost unless every
// name is held; see Lock.CheckHeld.
func (m *MultiLock) CheckHeld(ctx context.Context, tx *sql.Tx) error {
	for _, k := range m.locks {
		if err := k.CheckHeld(ctx, tx); err != nil {
			return err
		}
	}
	return nil
}
