package dblocktest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/sqllock/sqllock/dblock"
)

// MultiFunc is a Locker's AcquireAll or TryAcquireAll, its lock returned
// as a dblock.Lock (see MultiOf).
type MultiFunc func(ctx context.Context, names []string, opts ...dblock.Option) (dblock.Lock, error)

// MultiOf makes a MultiFunc of a method that returns its own lock type,
// such as rowlock.Locker.AcquireAll or Locker.AcquireAll.
func MultiOf[K dblock.Lock](f func(ctx context.Context, names []string, opts ...dblock.Option) (K, error)) MultiFunc {
	return func(ctx context.Context, names []string, opts ...dblock.Option) (dblock.Lock, error) {
		k, err := f(ctx, names, opts...)
		if err != nil {
			return nil, err
		}
		return k, nil
	}
}

// kinds are the suite's runs on the lock kinds the Harness declares: the
// conformance suite again on the kinds that are Lockers of exclusive
// holds (a semaphore of one permit, the writers, AcquireAll of two
// names), then each kind's own rules.
func (s *suite) kinds(t *testing.T) []subtest {
	var tests []subtest
	for _, k := range []struct {
		what  string
		unset bool
	}{{"semaphores (Harness.Semaphore)", s.h.Semaphore == nil}, {"read/write locks (Harness.ReadWrite)", s.h.ReadWrite == nil}, {"AcquireAll (Harness.Multi)", s.h.Multi == nil}} {
		if k.unset && !s.nested {
			t.Logf("dblocktest: %s not tested: nil", k.what)
		}
	}
	base := s.h
	base.Semaphore, base.ReadWrite, base.Multi = nil, nil, nil
	if s.h.Semaphore != nil {
		one := base
		one.New = func(t *testing.T) dblock.Locker { return s.semaphore(t, s.h.New(t), 1) }
		tests = append(tests,
			subtest{"semaphore of one permit is a Locker", func(t *testing.T) { testLocker(t, one, true) }},
			subtest{"semaphore", s.semaphoreRules})
	}
	if s.h.ReadWrite != nil {
		writers := base
		writers.New = func(t *testing.T) dblock.Locker { return s.h.ReadWrite(s.h.New(t)).Writers() }
		tests = append(tests,
			subtest{"writers are a Locker", func(t *testing.T) { testLocker(t, writers, true) }},
			subtest{"read/write lock", s.rwRules})
	}
	if s.h.Multi != nil {
		multi := base
		multi.New = func(t *testing.T) dblock.Locker {
			all, try := s.h.Multi(s.h.New(t))
			return pairLocker{all: all, try: try}
		}
		multi.Lose = nil
		if s.h.Lose != nil {
			multi.Lose = func(t *testing.T, k dblock.Lock) { s.h.Lose(t, k.(pairLock).Lock) }
		}
		tests = append(tests,
			subtest{"AcquireAll of two names is a Locker", func(t *testing.T) { testLocker(t, multi, true) }},
			subtest{"AcquireAll", s.multiRules})
	}
	return tests
}

// semaphore returns l's semaphores of limit permits, failing the test if
// the Harness cannot make them.
func (s *suite) semaphore(t *testing.T, l dblock.Locker, limit int) dblock.Semaphore {
	t.Helper()
	sem, err := s.h.Semaphore(l, limit)
	if err != nil {
		t.Fatalf("Harness.Semaphore(%d) = %v", limit, err)
	}
	return sem
}

// pairLocker is a Locker over AcquireAll: a name is taken with a second
// name derived from it, together, so that the conformance suite checks
// the multi-name acquisition (all of it, or none, and lost when one of
// the two is).
type pairLocker struct{ all, try MultiFunc }

func pair(name string) []string { return []string{name + "/2", name} }

func (p pairLocker) Acquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return pairOf(name, p.all, ctx, opts)
}

func (p pairLocker) TryAcquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return pairOf(name, p.try, ctx, opts)
}

func pairOf(name string, take MultiFunc, ctx context.Context, opts []dblock.Option) (dblock.Lock, error) {
	// A name refused must be reported as such, not its derived pair.
	if len(name) == 0 || len(name) > dblock.MaxNameLength-2 {
		return take(ctx, []string{name}, opts...)
	}
	k, err := take(ctx, pair(name), opts...)
	if err != nil {
		return nil, err
	}
	return pairLock{Lock: k, name: name}, nil
}

// pairLock is the lock of a pair, named as the name it was asked for.
type pairLock struct {
	dblock.Lock
	name string
}

func (k pairLock) Name() string { return k.name }

func (k pairLock) CheckHeld(ctx context.Context, tx *sql.Tx) error {
	return k.Lock.(dblock.Fencer).CheckHeld(ctx, tx)
}

// underlying is the lock a Locker of the Harness returned, under the
// suite's own wrapper.
func underlying(k dblock.Lock) dblock.Lock {
	if p, ok := k.(pairLock); ok {
		return p.Lock
	}
	return k
}
