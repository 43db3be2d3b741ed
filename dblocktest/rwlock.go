package dblocktest

import (
	"context"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

// MaxReaders is how many owners can hold the read lock of one name at
// once, as rowlock's; more wait for one of them to leave.
const MaxReaders = 64

func writerRow(name string) string { return name + kindSeparator + "w" }

func readerRow(name string, i int) string { return rowName(name, "r", i) }

// rwLocker is one side of the Locker's read/write locks.
type rwLocker struct {
	l         *Locker
	exclusive bool
}

var _ dblock.RWLocker = (*Locker)(nil)

// Readers is the shared side of the Locker's read/write locks, Writers the
// exclusive side, as rowlock's: Readers take shared holds of a name,
// Writers exclusive ones. The Locker meets dblock.RWLocker's contract; the
// holds are *RWLock. Errors of Acquire and TryAcquire: dblock.ErrUpgrade
// when a reader asks to write; dblock.ErrInvalidName,
// dblock.ErrInvalidOption (dblock.Fair for readers).
//
// Policy and rules as rowlock's: a writer first takes the name's writer
// place (writers queue for it, fairly with dblock.Fair), then waits for
// the readers in place to leave; once a writer waits, new readers wait
// behind it. A writer may read (re-entering its write hold) and write
// again; a reader may read again, at once even while a writer waits. A
// reader that asks to write gets dblock.ErrUpgrade at once. Readers
// refuse dblock.Fair. Tokens: a writer's is above every token handed out
// before it; a reader's is the last writer's, shared by the readers
// between two writers.
//
// Its names are their own namespace: read/write lock "x" is not the lock
// "x" of Locker.Acquire, nor semaphore "x". Locker.Lapse and Lose of a
// name end its read and write holds too.
func (l *Locker) Readers() dblock.Locker { return &rwLocker{l: l} }

// Writers is the exclusive side of the Locker's read/write locks; see
// Readers.
func (l *Locker) Writers() dblock.Locker { return &rwLocker{l: l, exclusive: true} }

// Acquire waits until the read (Readers) or write (Writers) lock of name
// is held, or ctx ends (the error then joins dblock.ErrNotAcquired and
// ctx.Err()). The lock it returns is an *RWLock. Errors: dblock.ErrUpgrade
// when a reader asks to write; dblock.ErrInvalidName,
// dblock.ErrInvalidOption (dblock.Fair for readers).
func (rw *rwLocker) Acquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return asLock(rw.acquire(ctx, name, opts, true))
}

// TryAcquire takes the read or write lock of name if it can at once, and
// returns dblock.ErrNotAcquired otherwise. Other errors as Acquire.
func (rw *rwLocker) TryAcquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return asLock(rw.acquire(ctx, name, opts, false))
}

// readTokenKey is the key under which a read hold's Context carries its
// token, for re-entry.
type readTokenKey struct{ name string }

func (rw *rwLocker) acquire(ctx context.Context, name string, opts []dblock.Option, wait bool) (*RWLock, error) {
	kctx, o, owner, carried, err := kindCall(ctx, opts, func() error {
		return checkKindName(name, readerRow(name, MaxReaders-1), "read/write lock")
	})
	if err != nil {
		return nil, err
	}
	if o.Fair && !rw.exclusive {
		return nil, &dblock.OptionError{Option: "Fair", Reason: "readers do not queue; writers may"}
	}
	readToken, hasToken := ctx.Value(readTokenKey{name}).(int64)
	var h *RWLock
	var try step
	var leave func()
	if rw.exclusive {
		wt := &writeTry{l: rw.l, ctx: kctx, name: name, owner: owner, carried: carried, o: o, wait: wait}
		try = func() (bool, time.Duration, error) {
			var pending time.Duration
			h, pending, err = wt.tryLocked()
			return h != nil, pending, err
		}
		leave = wt.leaveLocked
	} else {
		try = func() (bool, time.Duration, error) {
			var pending time.Duration
			h, pending = rw.readLocked(kctx, name, owner, carried, o, readToken, hasToken)
			return h != nil, pending, nil
		}
	}
	if err := rw.l.loop(kctx, name, wait, try, leave); err != nil {
		what := "read"
		if rw.exclusive {
			what = "write"
		}
		return nil, fmt.Errorf("dblocktest: %s lock %q: %w", what, name, err)
	}
	return h, nil
}

// readLocked takes a read hold if it may, or returns nil and how long
// until a row kept by MinHold alone is free.
func (rw *rwLocker) readLocked(ctx context.Context, name string, owner dblock.Owner, carried bool, o dblock.Options, readToken int64, hasToken bool) (*RWLock, time.Duration) {
	l := rw.l
	w := writerRow(name)
	if carried && l.heldByLocked(w, owner) {
		// A writer may read: under its own write lock.
		k := l.takeLocked(ctx, w, owner, o, nil)
		return newRWLock(k, name, k.token, false), 0
	}
	token := l.kinds.lastWriter[name]
	if hasToken {
		token = readToken
	}
	if carried {
		for i := range MaxReaders {
			if row := readerRow(name, i); l.heldByLocked(row, owner) {
				// A reader may read again, writer waiting or not.
				return newRWLock(l.takeLocked(ctx, row, owner, o, nil), name, token, false), 0
			}
		}
	}
	if free, pending := l.rowFreeLocked(w); !free {
		// A writer holds the lock, or waits for the readers to leave.
		return nil, pending
	}
	var pending time.Duration
	for i := range MaxReaders {
		row := readerRow(name, i)
		free, d := l.rowFreeLocked(row)
		if free {
			return newRWLock(l.takeLocked(ctx, row, owner, o, nil), name, token, false), 0
		}
		pending = soonest(pending, d)
	}
	return nil, pending
}

// writeTry is one acquisition of a write lock: the writer row, then the
// readers' leave.
type writeTry struct {
	l       *Locker
	ctx     context.Context
	name    string
	owner   dblock.Owner
	carried bool
	o       dblock.Options
	wait    bool
	place   *ticket // in the writer row's queue, with Fair
	k       *Lock   // the writer row, once taken
}

func (t *writeTry) tryLocked() (*RWLock, time.Duration, error) {
	l := t.l
	w := writerRow(t.name)
	if t.k == nil {
		if t.carried {
			for i := range MaxReaders {
				if l.heldByLocked(readerRow(t.name, i), t.owner) {
					return nil, 0, dblock.ErrUpgrade
				}
			}
		}
		t.k = l.takeLocked(t.ctx, w, t.owner, t.o, t.place)
		if t.k == nil {
			if t.wait && t.o.Fair && t.place == nil {
				t.place = new(ticket)
				e := l.names[w]
				e.queue = append(e.queue, t.place)
			}
			_, pending := l.rowFreeLocked(w)
			return nil, pending, nil
		}
	}
	if err := t.k.err; err != nil {
		// Lost (Lapse, Lose) while it waited for the readers.
		t.k = nil
		return nil, 0, err
	}
	var pending time.Duration
	for i := range MaxReaders {
		free, d := l.rowFreeLocked(readerRow(t.name, i))
		if !free {
			if !t.wait {
				l.giveBackLocked(t.k)
				t.k = nil
			}
			return nil, soonest(pending, d), nil
		}
	}
	l.kinds.lastWriter[t.name] = t.k.token
	h := newRWLock(t.k, t.name, t.k.token, true)
	t.k = nil
	return h, 0, nil
}

// leaveLocked gives back the writer row of a write that did not complete,
// and its place in the queue.
func (t *writeTry) leaveLocked() {
	if t.k != nil {
		t.l.giveBackLocked(t.k)
		t.k = nil
	}
	if t.place != nil {
		w := writerRow(t.name)
		if e := t.l.names[w]; e != nil && e.dequeue(t.place) {
			t.l.changedLocked(w, e)
		}
	}
}

// RWLock is a read or write hold of a read/write lock (see Locker.Readers). It
// implements dblock.Lock and dblock.Fencer, and is safe for concurrent
// use.
type RWLock struct {
	*Lock     // the hold of its row: Owner, Done, Err, Refresh, Release, CheckHeld
	name      string
	token     int64
	exclusive bool
	ctx       context.Context
}

var (
	_ dblock.Lock   = (*RWLock)(nil)
	_ dblock.Fencer = (*RWLock)(nil)
)

func newRWLock(k *Lock, name string, token int64, exclusive bool) *RWLock {
	h := &RWLock{Lock: k, name: name, token: token, exclusive: exclusive, ctx: k.Context()}
	if !exclusive {
		h.ctx = context.WithValue(k.Context(), readTokenKey{name}, token)
	}
	return h
}

// Name is the read/write lock's name.
func (h *RWLock) Name() string { return h.name }

// Exclusive is true for a write hold.
func (h *RWLock) Exclusive() bool { return h.exclusive }

// Token is the fencing token (see Locker.Readers).
func (h *RWLock) Token() int64 { return h.token }

// Context carries the owner (and a read's token) and is canceled when the
// hold is released or lost.
func (h *RWLock) Context() context.Context { return h.ctx }
