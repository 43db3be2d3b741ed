package rowlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// callerEntry is a call that takes a lock name from its caller.
type callerEntry struct {
	name string
	call func(ctx context.Context, l *rowlock.Locker, name string) error
	// kind: a lock kind, which SQLite does not have.
	kind bool
}

// lockErr keeps the error of a call that returns a lock, releasing the
// lock if there is one.
func lockErr(ctx context.Context, k dblock.Lock, err error) error {
	if err == nil {
		_ = k.Release(ctx)
	}
	return err
}

var callerEntries = []callerEntry{
	{name: "Acquire", call: func(ctx context.Context, l *rowlock.Locker, name string) error {
		k, err := l.Acquire(ctx, name)
		return lockErr(ctx, k, err)
	}},
	{name: "TryAcquire", call: func(ctx context.Context, l *rowlock.Locker, name string) error {
		k, err := l.TryAcquire(ctx, name)
		return lockErr(ctx, k, err)
	}},
	{name: "Held", call: func(ctx context.Context, l *rowlock.Locker, name string) error {
		_, _, err := l.Held(ctx, name)
		return err
	}},
	{name: "Semaphore.Acquire", kind: true, call: func(ctx context.Context, l *rowlock.Locker, name string) error {
		s, err := l.Semaphore(2)
		if err != nil {
			return err
		}
		k, err := s.Acquire(ctx, name)
		return lockErr(ctx, k, err)
	}},
	{name: "Semaphore.TryAcquire", kind: true, call: func(ctx context.Context, l *rowlock.Locker, name string) error {
		s, err := l.Semaphore(2)
		if err != nil {
			return err
		}
		k, err := s.TryAcquire(ctx, name)
		return lockErr(ctx, k, err)
	}},
	{name: "Readers.Acquire", kind: true, call: func(ctx context.Context, l *rowlock.Locker, name string) error {
		k, err := l.Readers().Acquire(ctx, name)
		return lockErr(ctx, k, err)
	}},
	{name: "Readers.TryAcquire", kind: true, call: func(ctx context.Context, l *rowlock.Locker, name string) error {
		k, err := l.Readers().TryAcquire(ctx, name)
		return lockErr(ctx, k, err)
	}},
	{name: "Writers.Acquire", kind: true, call: func(ctx context.Context, l *rowlock.Locker, name string) error {
		k, err := l.Writers().Acquire(ctx, name)
		return lockErr(ctx, k, err)
	}},
	{name: "Writers.TryAcquire", kind: true, call: func(ctx context.Context, l *rowlock.Locker, name string) error {
		k, err := l.Writers().TryAcquire(ctx, name)
		return lockErr(ctx, k, err)
	}},
	{name: "AcquireAll", kind: true, call: func(ctx context.Context, l *rowlock.Locker, name string) error {
		m, err := l.AcquireAll(ctx, []string{strings.ReplaceAll(name, lockinput.KindSeparator, "") + "-plain", name})
		if err == nil {
			_ = m.Release(ctx)
		}
		return err
	}},
	{name: "TryAcquireAll", kind: true, call: func(ctx context.Context, l *rowlock.Locker, name string) error {
		m, err := l.TryAcquireAll(ctx, []string{strings.ReplaceAll(name, lockinput.KindSeparator, "") + "-plain", name})
		if err == nil {
			_ = m.Release(ctx)
		}
		return err
	}},
}

// TestSeparatorInNamesRefused: every entry point that takes a name from
// its caller refuses one containing KindSeparator, on every dialect, and
// writes nothing: such a name could be a row of another name's lock kind.
func TestSeparatorInNamesRefused(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		for _, e := range callerEntries {
			if tg.Dialect == dblock.SQLite && e.kind {
				continue // the lock kinds need a server
			}
			t.Run(tg.Name+"/"+e.name, func(t *testing.T) {
				t.Parallel()
				l := newLocker(t, tg.DB)
				base := testdb.Name(t)
				for _, name := range []string{
					base + lockinput.KindSeparator + "w",
					base + lockinput.KindSeparator + "s0",
					lockinput.KindSeparator + base,
					base + lockinput.KindSeparator,
				} {
					err := e.call(t.Context(), l, name)
					if !errors.Is(err, dblock.ErrInvalidName) {
						t.Fatalf("%s(%q) = %v, want ErrInvalidName", e.name, name, err)
					}
					var ne *dblock.NameError
					if !errors.As(err, &ne) || ne.Name != name {
						t.Fatalf("%s(%q) = %#v, want a *dblock.NameError naming it", e.name, name, err)
					}
					if readRow(t, tg, name).exists {
						t.Fatalf("%s(%q) wrote its row", e.name, name)
					}
				}
			})
		}
	}
}

// TestSeparatorNamesCannotCollide: the collisions the separator made
// possible. A plain lock "cfg␟w" held the write lock of "cfg", and
// "api␟s0" slot 0 of semaphore "api"; both are refused now, and the kinds
// take their own rows.
func TestSeparatorNamesCannotCollide(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			l, other := newLocker(t, tg.DB), newLocker(t, tg.DB)
			cfg, api := testdb.Name(t)+"-cfg", testdb.Name(t)+"-api"
			if k, err := l.TryAcquire(ctx, cfg+lockinput.KindSeparator+"w"); !errors.Is(err, dblock.ErrInvalidName) {
				if k != nil {
					release(t, k)
				}
				t.Fatalf("plain lock %q = %v, want ErrInvalidName", cfg+lockinput.KindSeparator+"w", err)
			}
			w, err := other.Writers().TryAcquire(ctx, cfg)
			if err != nil {
				t.Fatalf("the write lock of %q: %v", cfg, err)
			}
			release(t, w)
			if k, err := l.TryAcquire(ctx, api+lockinput.KindSeparator+"s0"); !errors.Is(err, dblock.ErrInvalidName) {
				if k != nil {
					release(t, k)
				}
				t.Fatalf("plain lock %q = %v, want ErrInvalidName", api+lockinput.KindSeparator+"s0", err)
			}
			sem, err := other.Semaphore(1)
			if err != nil {
				t.Fatal(err)
			}
			p, err := sem.TryAcquire(ctx, api)
			if err != nil {
				t.Fatalf("the permit of semaphore %q: %v", api, err)
			}
			if slot := p.(*rowlock.Permit).Slot(); slot != 0 {
				t.Fatalf("slot %d, want 0", slot)
			}
			release(t, p)
		})
	}
}
