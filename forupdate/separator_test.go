package forupdate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestSeparatorInNamesRefused: every kind's Acquire and TryAcquire refuses
// a name containing U+241F, which the kinds put between a name and their
// rows' suffixes: a plain lock "cfg␟rw" held the read/write lock of "cfg",
// and "api␟s0" slot 0 of semaphore "api".
func TestSeparatorInNamesRefused(t *testing.T) {
	const sep = "\u241f"
	take := map[string]func(ctx context.Context, l *forupdate.Locker, name string, wait bool) (dblock.Lock, error){
		"lock": func(ctx context.Context, l *forupdate.Locker, name string, wait bool) (dblock.Lock, error) {
			if wait {
				return l.Acquire(ctx, name)
			}
			return l.TryAcquire(ctx, name)
		},
		"semaphore": func(ctx context.Context, l *forupdate.Locker, name string, wait bool) (dblock.Lock, error) {
			s, err := l.Semaphore(2)
			if err != nil {
				return nil, err
			}
			if wait {
				return s.Acquire(ctx, name)
			}
			return s.TryAcquire(ctx, name)
		},
		"read": func(ctx context.Context, l *forupdate.Locker, name string, wait bool) (dblock.Lock, error) {
			if wait {
				return l.Readers().Acquire(ctx, name)
			}
			return l.Readers().TryAcquire(ctx, name)
		},
		"write": func(ctx context.Context, l *forupdate.Locker, name string, wait bool) (dblock.Lock, error) {
			if wait {
				return l.Writers().Acquire(ctx, name)
			}
			return l.Writers().TryAcquire(ctx, name)
		},
	}
	for _, tg := range targets(t) {
		for kind, take := range take {
			for _, wait := range []bool{false, true} {
				t.Run(tg.Name+"/"+kind, func(t *testing.T) {
					l := newLocker(t, tg.DB)
					base := testdb.Name(t)
					for _, name := range []string{base + sep + "rw", base + sep + "s0", sep + base} {
						k, err := take(t.Context(), l, name, wait)
						if err == nil {
							release(t, k)
						}
						if !errors.Is(err, dblock.ErrInvalidName) {
							t.Fatalf("%s of %q (wait %v) = %v, want ErrInvalidName", kind, name, wait, err)
						}
					}
				})
			}
		}
	}
}
