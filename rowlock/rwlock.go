package rowlock

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/clock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/metrics"
)

// maxReaders is how many owners can hold the read lock of one name at
// once; more wait for one of them to leave. It is part of the on-disk
// format (every process must look at the same reader rows), so it never
// changes.
const maxReaders = 64

// writerRow is the row of the writer of read/write lock name; readerRow
// is reader slot i.
func writerRow(name string) string { return name + kindSeparator + "w" }

func readerRow(name string, i int) string { return name + kindSeparator + "r" + strconv.Itoa(i) }

// rwLocker is one side of the Locker's read/write locks (Readers,
// Writers).
type rwLocker struct {
	l         *Locker
	exclusive bool
}

var _ dblock.RWLocker = (*Locker)(nil)

// Readers is the shared side of the Locker's read/write locks, Writers the
// exclusive side: Readers take shared holds of a name, Writers exclusive
// ones. The Locker meets dblock.RWLocker's contract; the holds are
// *RWLock. A name held by a writer has no other holder, reader or writer;
// held by readers, it admits more readers (up to 64 owners). Both sides implement dblock.Locker,
// so dblock.Do and the packages built on a Locker work with either. The
// names are their own namespace: read/write lock "x" is not the lock "x"
// of Locker.Acquire, nor semaphore "x".
//
// Rows: the writer holds one row (the name, U+241F (␟), "w") and each
// reader one of 64 reader rows ("r" and a slot number), each a
// lock with its own lease, renewal and session marker: a dead reader or
// writer is passed over within the crash grace or its lease, and the
// reaper sweeps lapsed rows.
//
// Policy: writers are not starved. A writer first takes the writer row
// (writers queue for it as for any lock, fairly with dblock.Fair), then
// waits for the readers in place to leave; a reader takes a reader row and
// then checks the writer row, and backs off when a writer holds it. So
// once a writer is waiting, new readers wait behind it: a stream of
// readers cannot hold a writer off, but a stream of writers can hold
// readers off. (Each side checks the other after making its own row
// visible, so of a reader and a writer that arrive together at least one
// sees the other: never both pass.)
//
// Reentrancy, by owner (the one ctx carries): a writer may read, and
// reading under the write lock re-enters the writer row (the read holds
// it until released too); a writer may write again (re-entered); a reader
// may read again, at once even while a writer waits for it. A reader that
// asks to write gets dblock.ErrUpgrade, at once, holding nothing new:
// waiting would deadlock on itself. Upgrade by releasing the read lock,
// then acquiring the write lock.
//
// Fencing tokens: a writer's token is its row's, above every token
// handed out for the name before it, read or write. A reader's is the
// writer row's token when it was admitted, so readers between two writers
// share it: the last writer's, or that of a writer that took the writer
// row but gave up waiting for the readers to leave (so it is at least the
// last writer's and below the next one's, as dblock.RWLocker asks);
// re-entered with its hold's Context a read keeps its token. Both sides'
// holds implement dblock.Fencer.
//
// Errors of Acquire and TryAcquire: dblock.ErrUpgrade when a reader asks
// to write; dblock.ErrInvalidName (a name too long to derive its rows'
// names from, too), dblock.ErrInvalidOption (dblock.Fair for readers),
// dblock.ErrClosed, dblock.ErrSchemaMissing, or a driver error; when ctx
// ends first, dblock.ErrNotAcquired joined with ctx.Err(). A row taken and
// then lost before the acquisition could return it (a statement after the
// take stalled past its lease) makes it dblock.ErrLockLost, with nothing
// held.
func (l *Locker) Readers() dblock.Locker { return &rwLocker{l: l} }

// Writers is the exclusive side of the Locker's read/write locks; see
// Readers.
func (l *Locker) Writers() dblock.Locker { return &rwLocker{l: l, exclusive: true} }

// Acquire waits until the read (Readers) or write (Writers) lock of name
// is held, or ctx ends (the error then joins dblock.ErrNotAcquired and
// ctx.Err()). The lock it returns is an *RWLock. Errors: dblock.ErrUpgrade
// when a reader asks to write; dblock.ErrInvalidName (a name too long to
// derive its rows' names from, too), dblock.ErrInvalidOption (dblock.Fair
// for readers), dblock.ErrClosed, dblock.ErrSchemaMissing, or a driver
// error.
func (rw *rwLocker) Acquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return asLock(rw.acquire(ctx, name, opts, true))
}

// TryAcquire takes the read or write lock of name if it can at once, and
// returns dblock.ErrNotAcquired otherwise. Other errors as Acquire.
func (rw *rwLocker) TryAcquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return asLock(rw.acquire(ctx, name, opts, false))
}

func (rw *rwLocker) acquire(ctx context.Context, name string, opts []dblock.Option, wait bool) (_ *RWLock, err error) {
	o, err := rw.l.checkKindCall(ctx, opts, func() error {
		return checkKindName(name, readerRow(name, maxReaders-1), "read/write lock")
	})
	if err != nil {
		return nil, err
	}
	if o.Fair && !rw.exclusive {
		return nil, &dblock.OptionError{Option: "Fair", Reason: "readers do not queue; writers may"}
	}
	// A read re-entered with its hold's Context keeps its token.
	readToken, hasToken := ctx.Value(readTokenKey{name}).(int64)
	ctx, owner, carried, err := withOneOwner(ctx)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(dblock.ErrNotAcquired, err)
	}
	typ := metrics.TypeRead
	if rw.exclusive {
		typ = metrics.TypeWrite
	}
	in := rw.l.metrics.As(typ)
	started := clock.Now()
	defer func() { recordKind(ctx, in, wait, err, started) }()
	t := &rwTry{l: rw.l, name: name, opts: opts, owner: owner, carried: carried, w: writerRow(name), metrics: in, waits: wait}
	if hasToken {
		t.readToken = &readToken
	}
	t.readers = make([]string, maxReaders)
	for i := range t.readers {
		t.readers[i] = readerRow(name, i)
	}
	t.all = append([]string{t.w}, t.readers...)
	defer func() {
		t.endWait()
		if t.waited {
			in.Waiting(context.WithoutCancel(ctx), false, -1)
		}
	}()
	if rw.exclusive {
		return t.write(ctx, wait)
	}
	return t.read(ctx, wait)
}

// readTokenKey is the key under which a read hold's Context carries its
// token, for re-entry.
type readTokenKey struct{ name string }

// rwTry is one acquisition of a read/write lock.
type rwTry struct {
	l       *Locker
	name    string
	opts    []dblock.Option
	owner   dblock.Owner
	carried bool
	w       string   // the writer row
	readers []string // the reader rows
	all     []string // both
	// readToken is the token of the read hold whose Context the
	// acquisition was made with, if any.
	readToken *int64
	// waiting is the current wait, on the rows of waitingOn.
	waiting   *waiter
	waitingOn string
	// metrics records the holds (type read or write), and the wait.
	metrics *metrics.Instruments
	// waited: the acquisition has counted itself among the waiters.
	waited bool
	// waits: the acquisition waits (Acquire), rather than trying once.
	waits bool
}

// wait waits on the rows names (named what, for telling waits apart)
// until blockers may have changed.
func (t *rwTry) wait(ctx context.Context, what string, names []string, blockers []blocker) error {
	if t.waitingOn != what {
		t.endWait()
		// Registered after the look that found the blockers: the next
		// look, at once, sees a release in between.
		t.waiting, t.waitingOn = t.l.newWaiter(names), what
		if !t.waited {
			t.waited = true
			t.metrics.Waiting(context.WithoutCancel(ctx), false, 1)
		}
		return nil
	}
	_, err := t.waiting.wait(ctx, blockers)
	return err
}

func (t *rwTry) endWait() {
	if t.waiting != nil {
		t.waiting.end()
		t.waiting, t.waitingOn = nil, ""
	}
}

// read takes a read hold.
func (t *rwTry) read(ctx context.Context, wait bool) (*RWLock, error) {
	for {
		k, blockers, byWriter, err := t.readOnce(ctx, wait)
		if err != nil {
			return nil, err
		}
		if k != nil {
			// The writer row was read after the take (admit).
			if err := t.l.lostBeforeReturned(ctx, "read lock", t.name, k.Lock); err != nil {
				return nil, err
			}
			return k, nil
		}
		if !wait {
			return nil, dblock.ErrNotAcquired
		}
		what, names := "readers", t.readers
		if byWriter {
			what, names = "writer", []string{t.w}
		}
		if err := t.wait(ctx, what, names, blockers); err != nil {
			return nil, err
		}
	}
}

// readOnce looks at the rows and tries to read. It returns the hold, or
// what is in the way: the writer (byWriter), or every reader row.
//
// Its complexity (over 15) is the reader's steps in protocol order, as
// write's.
func (t *rwTry) readOnce(ctx context.Context, wait bool) (_ *RWLock, _ []blocker, byWriter bool, _ error) {
	rows, err := t.l.kinds().rows(ctx, t.all)
	if err != nil {
		return nil, nil, false, t.dbError(ctx, err)
	}
	w := rows[t.w]
	if t.carried && w.heldBy(t.owner) {
		// A writer may read: under its own write lock.
		k, err := t.take(ctx, t.w, true)
		switch {
		case err != nil:
			return nil, nil, false, err
		case k != nil:
			return t.hold(k, k.Token(), false), nil, false, nil
		}
		return nil, nil, false, nil // released since the look: look again
	}
	var free []string
	for _, name := range t.readers {
		r, exists := rows[name]
		switch {
		case t.carried && r.heldBy(t.owner):
			// A reader may read again, writer waiting or not.
			k, err := t.take(ctx, name, true)
			switch {
			case err != nil:
				return nil, nil, false, err
			case k != nil:
				return t.admit(ctx, k, true, wait)
			}
		case !exists || !r.live:
			free = append(free, name)
		}
	}
	if w.live {
		// A writer holds the lock, or waits for the readers to leave.
		return nil, []blocker{{name: t.w, h: w.holder}}, true, nil
	}
	rand.Shuffle(len(free), func(a, b int) { free[a], free[b] = free[b], free[a] })
	for _, name := range free {
		k, err := t.take(ctx, name, false)
		if err != nil {
			return nil, nil, false, err
		}
		if k != nil {
			return t.admit(ctx, k, false, wait)
		}
	}
	return nil, t.liveReaders(rows), false, nil
}

// admit checks, once the reader holds reader row k, that no writer has
// taken the writer row meanwhile; a new reader that finds one gives k
// back and waits for it, a re-entered one stays (the writer waits for its
// outer hold anyway). A writer row whose lease has lapsed is settled
// first: its writer may still be inside a fenced transaction.
func (t *rwTry) admit(ctx context.Context, k *Lock, reentered, wait bool) (*RWLock, []blocker, bool, error) {
	w, err := t.l.kinds().writer(ctx, t.w, stripeOf(t.w))
	if err == nil && !w.live && w.ownerID != "" && !(reentered && t.readToken != nil) {
		var rows map[string]kindRow
		if rows, err = t.settle(ctx, []string{t.w}, wait); err == nil {
			if r, ok := rows[t.w]; ok {
				w = r
			}
		}
	}
	if err != nil {
		t.l.giveBack(ctx, []*Lock{k})
		if errors.Is(err, dblock.ErrNotAcquired) {
			return nil, nil, false, err
		}
		return nil, nil, false, t.dbError(ctx, err)
	}
	token := w.holder.token
	switch {
	case reentered && t.readToken != nil:
		token = *t.readToken
	case !w.live || w.heldBy(t.owner):
	case reentered:
		// The writer row is taken by a writer that waits for this owner:
		// the token before its own (a takeover adds one), so that its
		// token stays above every reader's.
		token--
	default:
		t.l.giveBack(ctx, []*Lock{k})
		return nil, []blocker{{name: t.w, h: w.holder}}, true, nil
	}
	return t.hold(k, token, false), nil, false, nil
}

// take tries the row name once; nil and no error when someone else has it.
func (t *rwTry) take(ctx context.Context, name string, ownerHeld bool) (*Lock, error) {
	k, err := t.l.takeRow(ctx, name, t.opts, tryMode(t.waits), t.owner, ownerHeld, t.metrics)
	switch {
	case err == nil:
		return k, nil
	case errors.Is(err, dblock.ErrNotAcquired) && ctx.Err() == nil:
		return nil, nil
	}
	return nil, cutShort(ctx, err)
}

func (t *rwTry) dbError(ctx context.Context, err error) error {
	return cutShort(ctx, lockkit.WrapDBError("rowlock: read/write lock "+strconv.Quote(t.name), err))
}

// hold makes the handle of row k, which shows the read/write lock's name
// and token.
func (t *rwTry) hold(k *Lock, token int64, exclusive bool) *RWLock {
	k.name, k.token = t.name, token
	if !exclusive {
		k.ctx = context.WithValue(k.ctx, readTokenKey{t.name}, token)
	}
	return &RWLock{Lock: k, exclusive: exclusive}
}

var (
	_ dblock.Lock   = (*RWLock)(nil)
	_ dblock.Fencer = (*RWLock)(nil)
)

// RWLock is a read or write hold of a read/write lock (see Readers): a
// *Lock on the writer row or on a reader row. Its Name is the read/write
// lock's name. Its Token is a writer's own, above every token handed out
// for the name before it, or a reader's, the writer row's token when the
// reader was admitted (see Readers). Its Context carries a read's token
// too, so that a read re-entered with it keeps its token. A writer's
// Release lets readers and writers in; a reader's lets a waiting writer in
// once the last reader has left. CheckHeld proves a writer's hold that no
// one else holds the lock, a reader's that no writer does. It is safe for concurrent use.
type RWLock struct {
	*Lock
	exclusive bool
}

// Exclusive is true for a write hold.
func (h *RWLock) Exclusive() bool { return h.exclusive }
