package forupdate

import (
	"context"

	"github.com/sqllock/sqllock/dblock"
)

// rwLocker is one side of the Locker's read/write locks (Readers,
// Writers).
type rwLocker struct {
	l    *Locker
	kind kind
}

var _ dblock.RWLocker = (*Locker)(nil)

// Readers is the shared side of the Locker's read/write locks, Writers the
// exclusive side: Readers take shared holds of a name, Writers exclusive
// ones. The Locker meets dblock.RWLocker's contract; the holds are *Lock. A name held by a writer
// has no other holder; held by readers, it admits more readers. Both
// sides implement dblock.Locker, so dblock.Do and the packages built on a
// Locker work with either. The names are their own namespace: read/write
// lock "x" is neither the lock "x" of Locker.Acquire nor semaphore "x".
//
// Mechanism: a read/write lock is one row of the lock table (the name,
// U+241F, "rw"), created on first use. A reader locks it FOR SHARE
// (PostgreSQL) or LOCK IN SHARE MODE (MariaDB; FOR SHARE on MySQL 8.0), a
// writer FOR UPDATE, each in a transaction of its own held open as a
// Locker's lock is (Tx, Release, liveness, a dead holder freeing it at
// once: all as there). TryAcquire adds NOWAIT.
//
// Policy: the database's row-lock queue decides who comes next, and the
// two databases differ. InnoDB (MySQL, MariaDB) queues a new reader behind
// a writer that waits: once a writer waits, readers that arrive after it
// wait for it, so a stream of readers cannot starve a writer. PostgreSQL
// grants a shared row lock at once when only readers hold the row, even
// while a writer waits: overlapping readers that never leave the row free
// starve writers there. Choose package rowlock's read/write locks, which
// hold new readers back while a writer waits, when readers overlap
// without pause on PostgreSQL.
//
// Reentrancy, by owner (the one ctx carries), within one Locker: a writer
// may read, and the read re-enters the write hold (its transaction and
// token); a writer may write again; a reader may read again. A reader that
// asks to write gets dblock.ErrUpgrade at once, holding nothing new:
// waiting would deadlock on itself. Upgrade by releasing the read lock,
// then acquiring the write lock.
//
// Fencing tokens come from the Locker's counter (see the package doc),
// drawn once the row is locked: a writer's token is above every token
// handed out for the name before it, read or write. On PostgreSQL and
// MariaDB a reader draws its own too, above every earlier writer's; on
// MySQL 8.0, where drawing writes the name's counter row and would make
// readers exclude one another, a reader's token is the last writer's
// (0 before the first), shared by the readers between two writers.
//
// Errors of Acquire and TryAcquire: dblock.ErrUpgrade when a reader asks
// to write; dblock.ErrInvalidName (a name too long to derive its row's
// name from, too), dblock.ErrInvalidOption, ErrNoConnection,
// dblock.ErrSchemaMissing, or a driver error; when ctx ends first,
// dblock.ErrNotAcquired joined with ctx.Err(). Options as Locker.Acquire.
func (l *Locker) Readers() dblock.Locker { return &rwLocker{l: l, kind: kindRead} }

// Writers is the exclusive side of the Locker's read/write locks; see
// Readers.
func (l *Locker) Writers() dblock.Locker { return &rwLocker{l: l, kind: kindWrite} }

// Acquire waits in the database until the read (Readers) or write
// (Writers) lock of name is held, or ctx ends (the error then joins
// dblock.ErrNotAcquired and ctx.Err()). The lock it returns is a *Lock.
// Options as Locker.Acquire. Errors: dblock.ErrUpgrade when a reader asks
// to write; dblock.ErrInvalidName (a name too long to derive its row's
// name from, too), dblock.ErrInvalidOption, ErrNoConnection,
// dblock.ErrSchemaMissing, or a driver error.
func (rw *rwLocker) Acquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return asLock(rw.l.acquire(ctx, request{kind: rw.kind, name: name}, opts, true))
}

// TryAcquire takes the read or write lock of name if it can at once, and
// returns dblock.ErrNotAcquired otherwise. Other errors as Acquire.
func (rw *rwLocker) TryAcquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return asLock(rw.l.acquire(ctx, request{kind: rw.kind, name: name}, opts, false))
}
