package hostile

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

// Kit is a package's constructor and the constructor options every
// package has, for the cases about New. O is the package's Option type.
type Kit[O any] struct {
	// New calls the package's New with opts, after whatever the
	// backend's environment needs (its table, say), so that opts may
	// override it. A nil Locker means New refused.
	New func(e *Env, db *sql.DB, opts ...O) (dblock.Locker, error)
	// WithDialect and WithLogger are the package's options of those names.
	WithDialect func(dblock.Dialect) O
	WithLogger  func(*slog.Logger) O
	// DefaultTable is the package's table, which the SQL-looking names
	// try to drop.
	DefaultTable string
}

// NewWith calls New with opts on the pool db returns; if New wrongly
// succeeds, the Locker must still refuse to lock.
func NewWith[O any](k Kit[O], db func(e *Env) *sql.DB, opts ...O) Arrange {
	return func(e *Env) func(context.Context) error {
		pool := db(e)
		name := e.N("x")
		e.Watch(name)
		return func(ctx context.Context) error {
			l, err := k.New(e, pool, opts...)
			if err != nil {
				if l != nil {
					return fmt.Errorf("New returned a Locker with its error %v", err)
				}
				return err
			}
			if c, ok := l.(io.Closer); ok {
				defer c.Close()
			}
			return TryOn(l, name, ctx)
		}
	}
}

// ContractCases are the cases of the dblock contract: what every Locker
// must refuse (names, acquisition options, owners, contexts, pools, lock
// handles used wrongly) and the hostile-looking inputs it must accept.
func ContractCases[O any](k Kit[O]) []Case {
	var nilOption O // the zero of a func type: nil
	return []Case{
		// Names.
		{Name: "empty name", Want: []error{dblock.ErrInvalidName}, Arrange: Try(Global(""))},
		{Name: "empty name, Acquire", Want: []error{dblock.ErrInvalidName}, Arrange: Acquire(Global(""))},
		{Name: "name of 256 bytes", Want: []error{dblock.ErrInvalidName},
			Arrange: Try(func(e *Env) string { return e.N(strings.Repeat("n", 256-len(e.Prefix))) })},
		{Name: "name of 10 MB", Want: []error{dblock.ErrInvalidName},
			Arrange: Try(func(e *Env) string { return e.Prefix + TenMB() })},
		{Name: "name of 10 MB, Acquire", Want: []error{dblock.ErrInvalidName},
			Arrange: Acquire(func(e *Env) string { return e.Prefix + TenMB() })},
		{Name: "name not UTF-8", Want: []error{dblock.ErrInvalidName}, Arrange: Try(Named("\xff\xfe"))},
		{Name: "name not UTF-8, Acquire", Want: []error{dblock.ErrInvalidName}, Arrange: Acquire(Named("\xff\xfe"))},
		{Name: "name with a lone surrogate", Want: []error{dblock.ErrInvalidName}, Arrange: Try(Named("\xed\xa0\x80"))},
		{Name: "name with an overlong NUL", Want: []error{dblock.ErrInvalidName}, Arrange: Try(Named("\xc0\x80"))},
		{Name: "name with NUL", Want: []error{dblock.ErrInvalidName}, Arrange: Try(Named("a\x00b"))},
		{Name: "name cut inside a rune at 255 bytes", Want: []error{dblock.ErrInvalidName},
			Arrange: Try(func(e *Env) string { return ExactLength(e.Prefix, 256)[:255] })},
		{Name: "emoji name of 256 bytes", Want: []error{dblock.ErrInvalidName},
			Arrange: Try(func(e *Env) string { return ExactLength(e.Prefix, 256) })},
		{Name: "emoji name of 255 bytes is accepted", Arrange: func(e *Env) func(context.Context) error {
			name := ExactLength(e.Prefix, 255)
			e.MayWrite(name)
			return func(ctx context.Context) error { return e.AcquireDistinct(ctx, name) }
		}},
		{Name: "name that looks like SQL is just a name", Arrange: func(e *Env) func(context.Context) error {
			name := e.N("'; DROP TABLE " + k.DefaultTable + "; --")
			quoted := e.N(`"; DELETE FROM ` + k.DefaultTable + ` WHERE '1'='1`)
			e.MayWrite(name, quoted)
			// The snapshot after the call reads the table: it is still there.
			return func(ctx context.Context) error { return e.AcquireDistinct(ctx, name, quoted) }
		}},
		{Name: "LIKE wildcards are literal", Arrange: Legal("%", "_", "ab", "%%", `\%`)},
		{Name: "backslashes are literal", Arrange: Legal(`\`, `\\`, `\\\\`, `\'`, `\0`)},
		{Name: "names differing in case are different locks", Arrange: Legal("a", "A")},
		{Name: "trailing space makes a different lock", Arrange: Legal("a", "a ", "a\t", "a\n")},
		{Name: "leading space makes a different lock", Arrange: Legal("a", " a")},
		{Name: "composed and decomposed accents are different locks", Arrange: Legal("\u00e9", "e\u0301")},
		{Name: "SQL-looking name is refused as a held lock's twin", Want: []error{dblock.ErrNotAcquired},
			Arrange: func(e *Env) func(context.Context) error {
				name := e.N("' OR '1'='1")
				e.Hold(name)
				e.Watch(name)
				return Try(Global(name))(e)
			}},

		// Acquisition options.
		{Name: "TTL 0", Want: []error{dblock.ErrInvalidOption}, Arrange: Try(Named("x"), dblock.TTL(0))},
		{Name: "TTL negative", Want: []error{dblock.ErrInvalidOption}, Arrange: Try(Named("x"), dblock.TTL(-time.Second))},
		{Name: "TTL most negative", Want: []error{dblock.ErrInvalidOption}, Arrange: Try(Named("x"), dblock.TTL(math.MinInt64))},
		{Name: "TTL below MinTTL", Want: []error{dblock.ErrInvalidOption}, Arrange: Try(Named("x"), dblock.TTL(dblock.MinTTL-1))},
		{Name: "TTL below MinTTL, Acquire", Want: []error{dblock.ErrInvalidOption}, Arrange: Acquire(Named("x"), dblock.TTL(time.Millisecond))},
		{Name: "MinHold negative", Want: []error{dblock.ErrInvalidOption}, Arrange: Try(Named("x"), dblock.MinHold(-time.Nanosecond))},
		{Name: "note too long", Want: []error{dblock.ErrInvalidOption},
			Arrange: Try(Named("x"), dblock.Note(strings.Repeat("n", dblock.MaxNoteLength+1)))},
		{Name: "note not UTF-8", Want: []error{dblock.ErrInvalidOption}, Arrange: Try(Named("x"), dblock.Note("bad\xffnote"))},
		{Name: "note with NUL", Want: []error{dblock.ErrInvalidOption}, Arrange: Try(Named("x"), dblock.Note("nul\x00note"))},
		{Name: "nil option", Want: []error{dblock.ErrInvalidOption}, Arrange: Try(Named("x"), nil)},
		{Name: "bad option with a bad name reports the name", Want: []error{dblock.ErrInvalidName},
			Arrange: Try(Global(""), dblock.TTL(-1))},

		// Owners.
		{Name: "owner id empty", Want: []error{dblock.ErrInvalidOption}, Arrange: WithCtx(Owner(""), Try(Named("x")))},
		{Name: "owner id too long", Want: []error{dblock.ErrInvalidOption},
			Arrange: WithCtx(Owner(strings.Repeat("o", dblock.MaxOwnerIDLength+1)), Try(Named("x")))},
		{Name: "owner id not UTF-8", Want: []error{dblock.ErrInvalidOption}, Arrange: WithCtx(Owner("bad\xffowner"), Try(Named("x")))},
		{Name: "owner id with NUL", Want: []error{dblock.ErrInvalidOption}, Arrange: WithCtx(Owner("nul\x00owner"), Try(Named("x")))},
		{Name: "owner id empty, Acquire", Want: []error{dblock.ErrInvalidOption}, Arrange: WithCtx(Owner(""), Acquire(Named("x")))},
		{Name: "another owner's held lock", Want: []error{dblock.ErrNotAcquired},
			Arrange: OnHeld(StillHeld, func(e *Env, k dblock.Lock, ctx context.Context) error {
				return Try(Global(k.Name()))(e)(ctx)
			})},
		{Name: "another owner's held lock, on another Locker", Want: []error{dblock.ErrNotAcquired},
			Arrange: OnHeld(StillHeld, func(e *Env, k dblock.Lock, ctx context.Context) error {
				return TryOn(e.Locker(e.DB), k.Name(), ctx)
			})},

		// Contexts.
		{Name: "nil context, TryAcquire", Want: []error{dblock.ErrInvalidOption}, Arrange: WithCtx(NilContext, Try(Named("x")))},
		{Name: "nil context, Acquire", Want: []error{dblock.ErrInvalidOption},
			Arrange: func(e *Env) func(context.Context) error {
				name := e.N("x")
				e.Watch(name)
				// Not Acquire: its hang bound would derive a context from the nil
				// (and panic) before the Locker saw it.
				return func(context.Context) error { return GotLock(e.L.Acquire(nilCtx, name)) }
			}},
		{Name: "nil context, Release", Want: []error{dblock.ErrInvalidOption},
			Arrange: OnHeld(StillHeld, func(_ *Env, k dblock.Lock, _ context.Context) error { return k.Release(nilCtx) })},
		{Name: "nil context, Refresh", Want: []error{dblock.ErrInvalidOption},
			Arrange: OnHeld(StillHeld, func(_ *Env, k dblock.Lock, _ context.Context) error { return k.Refresh(nilCtx) })},
		{Name: "canceled context, TryAcquire", Want: []error{dblock.ErrNotAcquired, context.Canceled}, Arrange: WithCtx(Canceled, Try(Named("x")))},
		{Name: "canceled context, Acquire", Want: []error{dblock.ErrNotAcquired, context.Canceled}, Arrange: WithCtx(Canceled, Acquire(Named("x")))},
		{Name: "canceled context on a held lock, Acquire", Want: []error{dblock.ErrNotAcquired, context.Canceled},
			Arrange: OnHeld(StillHeld, func(e *Env, k dblock.Lock, ctx context.Context) error {
				return Acquire(Global(k.Name()))(e)(Canceled(ctx))
			})},
		{Name: "deadline passed, TryAcquire", Want: []error{dblock.ErrNotAcquired, context.DeadlineExceeded},
			Arrange: WithCtx(PastDeadline, Try(Named("x")))},
		{Name: "deadline passed, Acquire", Want: []error{dblock.ErrNotAcquired, context.DeadlineExceeded},
			Arrange: WithCtx(PastDeadline, Acquire(Named("x")))},

		// Database handles and constructor options.
		{Name: "New(nil)", Want: []error{dblock.ErrInvalidDB}, Arrange: NewWith(k, func(*Env) *sql.DB { return nil })},
		{Name: "New(nil) with a dialect", Want: []error{dblock.ErrInvalidDB},
			Arrange: NewWith(k, func(*Env) *sql.DB { return nil }, k.WithDialect(dblock.Postgres))},
		{Name: "New with a nil Option", Want: []error{dblock.ErrInvalidOption}, Arrange: NewWith(k, SharedDB, nilOption)},
		{Name: "New with dialect oracle", Want: []error{dblock.ErrUnknownDialect}, Arrange: NewWith(k, SharedDB, k.WithDialect("oracle"))},
		{Name: "New with an empty dialect on an unknown driver", Want: []error{dblock.ErrUnknownDialect},
			Arrange: NewWith(k, func(e *Env) *sql.DB {
				db := sql.OpenDB(Connector{})
				e.T.Cleanup(func() { _ = db.Close() })
				return db
			})},
		{Name: "New with the other dialect", Want: []error{dblock.ErrUnknownDialect},
			Arrange: func(e *Env) func(context.Context) error {
				return NewWith(k, SharedDB, k.WithDialect(OtherDialect(e.Target.Dialect)))(e)
			}},
		{Name: "New with a nil logger", Want: []error{dblock.ErrInvalidOption}, Arrange: NewWith(k, SharedDB, k.WithLogger(nil))},
		{Name: "closed *sql.DB, TryAcquire", Want: []error{dblock.ErrInvalidDB},
			Arrange: WithLocker(func(e *Env) dblock.Locker { return e.Locker(e.ClosedDB()) }, TryOn)},
		{Name: "closed *sql.DB, Acquire", Want: []error{dblock.ErrInvalidDB},
			Arrange: WithLocker(func(e *Env) dblock.Locker { return e.Locker(e.ClosedDB()) }, AcquireOn())},

		// Lock handles.
		{Name: "double Release", Want: []error{dblock.ErrNotHeld},
			Arrange: OnHeld(Released, func(_ *Env, k dblock.Lock, ctx context.Context) error { return k.Release(ctx) })},
		{Name: "Refresh after Release", Want: []error{dblock.ErrNotHeld},
			Arrange: OnHeld(Released, func(_ *Env, k dblock.Lock, ctx context.Context) error { return k.Refresh(ctx) })},
		{Name: "double Release of one reentrant hold keeps the other", Want: []error{dblock.ErrNotHeld},
			Arrange: func(e *Env) func(context.Context) error {
				name := e.N("held")
				e.Watch(name)
				oc := dblock.WithOwner(e.T.Context(), "hostile-"+Random())
				first, err := e.L.TryAcquire(oc, name)
				if err != nil {
					e.T.Fatalf("arrange: %v", err)
				}
				second, err := e.L.TryAcquire(oc, name)
				if err != nil {
					e.T.Fatalf("arrange: re-enter: %v", err)
				}
				e.T.Cleanup(func() {
					if !e.wedged {
						_ = second.Release(context.Background())
					}
				})
				if err := first.Release(oc); err != nil {
					e.T.Fatalf("arrange: first Release: %v", err)
				}
				StillHeld(e, second)
				return func(ctx context.Context) error { return first.Release(ctx) }
			}},
	}
}
