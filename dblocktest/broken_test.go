package dblocktest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/dblocktest"
	"github.com/sqllock/sqllock/internal/testdb"
)

// brokenEnv names the flaw of the Locker TestChildBrokenLocker runs the
// suite on.
const brokenEnv = "SQLLOCK_TEST_BROKEN"

// flaws are Lockers that each break one rule, over the in-memory Locker,
// and the subtests of TestLocker that must catch them. "none" breaks
// nothing: the suite must pass it, so a suite that failed everything
// would be caught too.
var flaws = []struct {
	name  string
	catch []string
}{
	{"none", nil},
	{"no exclusion", []string{"TryAcquire", "exclusion_under_concurrency", "reentrancy"}},
	{"constant token", []string{"tokens_grow", "exclusion_under_concurrency"}},
	{"owner ignored", []string{"reentrancy", "reentrancy_of_concurrent_first_acquisitions", "bad_input"}},
	{"second Release succeeds", []string{"released_lock"}},
	{"loss not in Err", []string{"loss_reported_by_Refresh", "loss_closes_Done_on_its_own"}},
	{"options ignored", []string{"bad_input", "MinHold"}},
	{"Lock.Context from Acquire's", []string{"lock_outlives_the_Acquire_context"}},
	// "Acquire waits for Release" catches it only when its waiter's
	// Acquire runs before the Release, which nothing can make sure of.
	{"Acquire never waits", []string{"Acquire_gives_up_when_its_context_ends"}},
	{"Done never closed", []string{"released_lock", "loss_closes_Done_on_its_own", "loss_reported_by_Refresh"}},
	// Flaws of the lock kinds (kindFlaws).
	{"semaphore over its limit", []string{"semaphore", "semaphore_of_one_permit_is_a_Locker"}},
	{"readers exclusive", []string{"read/write_lock"}},
	{"readers ignore writers", []string{"read/write_lock"}},
	{"upgrade waits", []string{"read/write_lock"}},
	{"AcquireAll keeps a part", []string{"AcquireAll"}},
	{"AcquireAll loss unseen", []string{"AcquireAll_of_two_names_is_a_Locker"}},
}

// TestSuiteCatchesBrokenLockers runs the suite, in a child process each,
// on Lockers with one flaw, and checks that the subtests meant to catch
// the flaw fail, and that the suite passes the Locker with none.
func TestSuiteCatchesBrokenLockers(t *testing.T) {
	for _, f := range flaws {
		t.Run(f.name, func(t *testing.T) {
			child := testdb.Child(t, "TestChildBrokenLocker", brokenEnv+"="+f.name)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			var failed []string
			passed := 0
			for {
				// Level-one subtests' results, printed by -test.v.
				line, err := child.WaitLine(ctx, "    --- ")
				if err != nil {
					break
				}
				result, rest, _ := strings.Cut(strings.TrimPrefix(line, "    --- "), ": TestChildBrokenLocker/")
				subtest, _, _ := strings.Cut(rest, " ")
				switch result {
				case "FAIL":
					failed = append(failed, subtest)
				case "PASS":
					passed++
				}
			}
			if passed+len(failed) == 0 {
				t.Fatal("the child reported no subtest")
			}
			for _, want := range f.catch {
				if !slices.Contains(failed, want) {
					t.Errorf("subtest %s passed a Locker whose flaw it must catch (failed: %v)", want, failed)
				}
			}
			if len(f.catch) == 0 && len(failed) > 0 {
				t.Errorf("the suite failed a Locker with no flaw: %v", failed)
			}
			code := child.Cmd.ProcessState.ExitCode()
			if (code == 0) != (len(f.catch) == 0) {
				t.Errorf("child exit code %d with failed subtests %v", code, failed)
			}
		})
	}
}

// TestChildBrokenLocker is the body of TestSuiteCatchesBrokenLockers's
// children.
func TestChildBrokenLocker(t *testing.T) {
	if !testdb.IsChild() {
		return
	}
	flaw := os.Getenv(brokenEnv)
	// A flawed Locker may wait where it must not: fail the wait soon.
	dblocktest.SetHangBound(2 * time.Second)
	h := memHarness(t)
	mem := h.New(t).(*dblocktest.Locker)
	h.New = func(*testing.T) dblock.Locker { return &broken{Locker: mem, flaw: flaw} }
	kindFlaws(&h, mem, flaw)
	dblocktest.TestLocker(t, h)
}

// kindFlaws sets h's lock kinds, over mem, with flaw if it is one of
// theirs. They ignore the Locker they are given (a broken one).
func kindFlaws(h *dblocktest.Harness, mem *dblocktest.Locker, flaw string) {
	h.Semaphore = func(_ dblock.Locker, limit int) (dblock.Semaphore, error) {
		if flaw == "semaphore over its limit" && limit < dblocktest.MaxSemaphoreLimit {
			limit++
		}
		return mem.Semaphore(limit)
	}
	h.ReadWrite = func(dblock.Locker) dblock.RWLocker {
		switch flaw {
		case "readers exclusive":
			return rwSides{mem.Writers(), mem.Writers()}
		case "readers ignore writers":
			return rwSides{dblocktest.NewLocker().Readers(), mem.Writers()}
		case "upgrade waits":
			return rwSides{mem.Readers(), freshOwner{mem.Writers()}}
		}
		return mem
	}
	h.Multi = func(dblock.Locker) (dblocktest.MultiFunc, dblocktest.MultiFunc) {
		all, try := dblocktest.MultiOf(mem.AcquireAll), dblocktest.MultiOf(mem.TryAcquireAll)
		switch flaw {
		case "AcquireAll keeps a part":
			try = func(ctx context.Context, names []string, opts ...dblock.Option) (dblock.Lock, error) {
				ctx = dblock.WithOwner(ctx, fmt.Sprint("part-", owners.Add(1)))
				for _, name := range names {
					if _, err := mem.TryAcquire(ctx, name, opts...); err != nil {
						return nil, err // what was taken stays held
					}
				}
				return mem.TryAcquireAll(ctx, names, opts...)
			}
		case "AcquireAll loss unseen":
			unseen := func(f dblocktest.MultiFunc) dblocktest.MultiFunc {
				return func(ctx context.Context, names []string, opts ...dblock.Option) (dblock.Lock, error) {
					k, err := f(ctx, names, opts...)
					if err != nil {
						return nil, err
					}
					return &brokenLock{Lock: k, flaw: "Done never closed"}, nil
				}
			}
			all, try = unseen(all), unseen(try)
		}
		return all, try
	}
}

// freshOwner is a Locker that acquires for a fresh owner whatever the
// context carries: a reader asking to write is not recognised, and waits.
type freshOwner struct{ dblock.Locker }

func (f freshOwner) Acquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return f.Locker.Acquire(f.fresh(ctx), name, opts...)
}

func (f freshOwner) TryAcquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return f.Locker.TryAcquire(f.fresh(ctx), name, opts...)
}

func (freshOwner) fresh(ctx context.Context) context.Context {
	if _, ok := dblock.OwnerFromContext(ctx); !ok {
		return ctx
	}
	return dblock.WithOwner(ctx, fmt.Sprint("fresh-", owners.Add(1)))
}

// owners numbers the owners of the "owner ignored" flaw.
var owners atomic.Int64

// broken is a Locker with one flaw.
type broken struct {
	dblock.Locker
	flaw string
}

func (b *broken) Acquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return b.take(ctx, name, opts, b.Locker.Acquire)
}

func (b *broken) TryAcquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return b.take(ctx, name, opts, b.Locker.TryAcquire)
}

func (b *broken) take(ctx context.Context, name string, opts []dblock.Option,
	take func(context.Context, string, ...dblock.Option) (dblock.Lock, error)) (dblock.Lock, error) {
	switch b.flaw {
	case "no exclusion":
		take = dblocktest.NewLocker().TryAcquire // a lock space per call
	case "owner ignored":
		ctx = dblock.WithOwner(ctx, fmt.Sprint("someone-new-", owners.Add(1)))
	case "options ignored":
		opts = nil
	case "Acquire never waits":
		take = b.Locker.TryAcquire
	}
	k, err := take(ctx, name, opts...)
	if err != nil {
		return nil, err
	}
	bk := &brokenLock{Lock: k, flaw: b.flaw}
	if b.flaw == "Lock.Context from Acquire's" {
		bk.ctx = ctx
	}
	return bk, nil
}

// brokenLock is a lock with the flaw of its Locker.
type brokenLock struct {
	dblock.Lock
	flaw string
	ctx  context.Context
}

func (k *brokenLock) Token() int64 {
	if k.flaw == "constant token" {
		return 1
	}
	return k.Lock.Token()
}

func (k *brokenLock) Release(ctx context.Context) error {
	err := k.Lock.Release(ctx)
	if k.flaw == "second Release succeeds" && errors.Is(err, dblock.ErrNotHeld) {
		return nil
	}
	return err
}

func (k *brokenLock) Err() error {
	err := k.Lock.Err()
	if k.flaw == "loss not in Err" && errors.Is(err, dblock.ErrLockLost) {
		return nil
	}
	return err
}

func (k *brokenLock) Done() <-chan struct{} {
	if k.flaw == "Done never closed" {
		return make(chan struct{})
	}
	return k.Lock.Done()
}

func (k *brokenLock) Context() context.Context {
	if k.ctx != nil {
		return k.ctx
	}
	return k.Lock.Context()
}

// rwSides is a dblock.RWLocker of two given sides.
type rwSides struct{ readers, writers dblock.Locker }

func (rw rwSides) Readers() dblock.Locker { return rw.readers }
func (rw rwSides) Writers() dblock.Locker { return rw.writers }
