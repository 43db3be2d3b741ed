package dblocktest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

// Harness is what TestLocker needs to know of a Locker implementation.
type Harness struct {
	// New returns a Locker on the lock space under test. Required. The
	// suite calls it more than once in a test, for Lockers that must
	// exclude each other as two processes on one database do. For a
	// database Locker, return a new one on the same database, closed when
	// t ends. For an in-memory Locker, which is its own lock space, return
	// the same one.
	New func(t *testing.T) dblock.Locker

	// Lose makes lock lost from outside its process, as the holder's
	// database would: the lease ended (admin's Revoke, never a
	// write to the lock table), the session killed (forupdate),
	// Locker.Lapse (in memory). The holder learns it at its
	// next check, a Refresh or its own background one, and another owner
	// can then take the name (at once, or by waiting for it). Optional:
	// without it the suite does not test loss, and says so in the log.
	Lose func(t *testing.T, lock dblock.Lock)

	// Tx begins a transaction on the lock's database for
	// dblock.Fencer.CheckHeld; the suite rolls it back. Required when the
	// Locker's locks implement dblock.Fencer. A Locker without a database
	// returns nil.
	Tx func(t *testing.T) *sql.Tx

	// Fair is set when Acquire accepts dblock.Fair; otherwise the suite
	// checks that the Locker refuses it with dblock.ErrInvalidOption, as
	// dblock.Fair says.
	Fair bool

	// MinHold is set when the Locker honours dblock.MinHold (a lock
	// released early stays taken); otherwise the suite checks that a
	// positive MinHold is refused with dblock.ErrInvalidOption.
	MinHold bool

	// ReentrantAcrossLockers is set when an owner holding a lock through
	// one Locker re-enters it through another (rowlock keeps owners in
	// the database; forupdate's reentrancy is within one Locker).
	ReentrantAcrossLockers bool

	// The lock kinds, each optional: the suite checks those set, with the
	// rules rowlock documents for them, and says in the log which it does
	// not check. Each is given a Locker New made. Lose is given their holds
	// too (a *Permit, an *RWLock, a *MultiLock of the Locker under test),
	// and must make every hold it is given lost.

	// Semaphore returns l's semaphores of limit permits per name
	// (rowlock's, forupdate's and the in-memory Locker.Semaphore), whose
	// contract is dblock.Semaphore's.
	Semaphore func(l dblock.Locker, limit int) (dblock.Semaphore, error)

	// ReadWrite returns l's read/write locks (rowlock's, forupdate's and
	// the in-memory Locker, each a dblock.RWLocker), whose contract is
	// dblock.RWLocker's.
	ReadWrite func(l dblock.Locker) dblock.RWLocker

	// WritersFirst is set when, once a writer waits, new readers wait
	// behind it (rowlock, the in-memory Locker; forupdate on InnoDB, not
	// on PostgreSQL): the suite then checks that readers cannot starve a
	// writer.
	WritersFirst bool

	// Multi returns l's AcquireAll and TryAcquireAll (see MultiOf).
	Multi func(l dblock.Locker) (acquireAll, tryAcquireAll MultiFunc)
}

// TestLocker runs the conformance suite of dblock.Locker on the Locker h
// makes, each behaviour a subtest:
//
//   - TryAcquire takes a free name and refuses a held one with
//     dblock.ErrNotAcquired, from the same Locker and from another;
//   - Acquire waits for a release, and gives up with dblock.ErrNotAcquired
//     joined with the context's error when its context ends first;
//   - a lock outlives Acquire's context, and its Context carries the
//     owner and the values of Acquire's context;
//   - exclusion under concurrency: goroutines on two Lockers take one
//     name in turns, and a ledger fails the test if two ever hold it at
//     once or a token does not grow;
//   - reentrancy: an owner (dblock.WithOwner, Lock.Context) re-enters its
//     own lock, sharing the token, and the lock is freed by its last hold;
//   - tokens grow strictly per name, across Lockers and losses;
//   - Release and Refresh on a released lock give dblock.ErrNotHeld, Err
//     dblock.ErrReleased, and Done and Context are closed;
//   - loss (with Harness.Lose): Refresh reports dblock.ErrLockLost and Done
//     closes, or Done closes on its own; Release then reports the loss,
//     and another owner gets the lock with a larger token;
//   - dblock.Fencer's CheckHeld, for locks that implement it;
//   - bad input (empty, over-long or non-UTF-8 names; TTL under
//     dblock.MinTTL, negative MinHold, bad notes, nil options, bad owner
//     ids, options the Harness says are unsupported) gets an error wrapping
//     dblock.ErrInvalidName or dblock.ErrInvalidOption and takes no lock;
//   - the lock kinds the Harness declares (Semaphore, ReadWrite, Multi):
//     all of the above again on a semaphore of one permit, on the writers
//     and on AcquireAll of two names, each a Locker of exclusive holds;
//     then each kind's own rules, as rowlock documents them: a semaphore's
//     limit, slots, one permit per owner and dblock.ErrLimitMismatch;
//     readers sharing and writers excluding, dblock.ErrUpgrade, a writer
//     reading, writers not starved, the tokens of readers and writers;
//     AcquireAll's all-or-none, its names being Acquire's, overlapping
//     sets never deadlocking, bad input.
//
// It asks nothing beyond dblock's documented contract; where two correct
// Lockers differ, Harness says which way the one under test goes. Every
// lock a subtest takes is released when it ends, failed or not.
func TestLocker(t *testing.T, h Harness) {
	t.Helper()
	testLocker(t, h, false)
}

// testLocker is TestLocker; nested is set for its runs on the lock kinds.
func testLocker(t *testing.T, h Harness, nested bool) {
	t.Helper()
	if h.New == nil {
		t.Fatal("dblocktest: Harness.New is nil")
	}
	s := &suite{h: h, nested: nested}
	tests := []subtest{
		{"TryAcquire", s.tryAcquire},
		{"Acquire waits for Release", s.acquireWaits},
		{"Acquire gives up when its context ends", s.acquireContext},
		{"lock outlives the Acquire context", s.lockContext},
		{"names are independent", s.independentNames},
		{"exclusion under concurrency", s.exclusion},
		{"reentrancy", s.reentrancy},
		{"reentrancy of concurrent first acquisitions", s.concurrentReentry},
		{"tokens grow", s.tokens},
		{"released lock", s.released},
		{"MinHold", s.minHold},
		{"bad input", s.badInput},
	}
	// Behaviours the Harness says the Locker lacks, or cannot provoke, get
	// no subtest: a subtest that checks nothing would pass for nothing.
	if h.ReentrantAcrossLockers {
		tests = append(tests, subtest{"reentrancy across Lockers", s.reentryAcrossLockers})
	}
	if h.Lose != nil {
		tests = append(tests,
			subtest{"loss reported by Refresh", s.lossByRefresh},
			subtest{"loss closes Done on its own", s.lossInBackground})
	} else {
		t.Log("dblocktest: loss not tested: Harness.Lose is nil")
	}
	if s.fencer(t) {
		if h.Tx == nil {
			t.Error("dblocktest: the locks implement dblock.Fencer, and Harness.Tx is nil: CheckHeld cannot be tested")
		} else {
			tests = append(tests, subtest{"CheckHeld", s.checkHeld})
		}
	}
	tests = append(tests, s.kinds(t)...)
	for _, c := range tests {
		t.Run(c.name, c.run)
	}
}

type suite struct {
	h      Harness
	nested bool // a run on a lock kind, within TestLocker
}

type subtest struct {
	name string
	run  func(t *testing.T)
}

// hangBound bounds every wait of the suite: a guard against hangs, far
// above what any correct Locker needs, never a timing assertion. The
// suite's own tests shorten it for Lockers that wait by mistake.
var hangBound = time.Minute

// lossTTL is the TTL of locks the suite makes lost: their holders check
// every TTL/3 or so, so Done closes soon after the loss.
const lossTTL = 1500 * time.Millisecond

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// lockName returns a name no other test or run uses: the test's name,
// readable in a lock table, and 64 random bits.
func lockName(t *testing.T) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails since Go 1.24
	suffix := "-" + hex.EncodeToString(b[:])
	base := unsafeChars.ReplaceAllString(t.Name(), "_")
	if room := 200 - len(suffix); len(base) > room {
		base = base[len(base)-room:]
	}
	return "dblocktest/" + base + suffix
}

// fencer reports whether the Locker's locks implement dblock.Fencer.
func (s *suite) fencer(t *testing.T) bool {
	t.Helper()
	k := hold(t, s.h.New(t), t.Context(), lockName(t))
	release(t, k)
	_, ok := underlying(k).(dblock.Fencer)
	return ok
}

// bounded returns t's context, ended after hangBound too: the suite's
// calls are bounded, so a Locker that wrongly waits fails the test instead
// of hanging it.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), hangBound)
	t.Cleanup(cancel)
	return ctx
}

// lockers returns two Lockers of the lock space under test.
func (s *suite) lockers(t *testing.T) (dblock.Locker, dblock.Locker) {
	t.Helper()
	return s.h.New(t), s.h.New(t)
}

// hold takes name with TryAcquire, failing the test if it cannot, and
// releases it when the test ends.
func hold(t *testing.T, l dblock.Locker, ctx context.Context, name string, opts ...dblock.Option) dblock.Lock {
	t.Helper()
	k, err := l.TryAcquire(ctx, name, opts...)
	if err != nil {
		t.Fatalf("TryAcquire(%q) = %v, want the lock", name, err)
	}
	releaseAtEnd(t, k)
	return k
}

// acquireWithin takes name with Acquire, failing the test if it cannot
// within hangBound, and releases it when the test ends.
func acquireWithin(t *testing.T, l dblock.Locker, ctx context.Context, name string, opts ...dblock.Option) dblock.Lock {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, hangBound)
	defer cancel()
	k, err := l.Acquire(wctx, name, opts...)
	if err != nil {
		t.Fatalf("Acquire(%q) = %v, want the lock", name, err)
	}
	releaseAtEnd(t, k)
	return k
}

// releaseAtEnd releases k when the test ends, unless it was released.
func releaseAtEnd(t *testing.T, k dblock.Lock) {
	t.Cleanup(func() { _ = k.Release(context.Background()) })
}

// release releases k and fails the test on error.
func release(t *testing.T, k dblock.Lock) {
	t.Helper()
	if err := k.Release(t.Context()); err != nil {
		t.Fatalf("Release(%q) = %v, want nil", k.Name(), err)
	}
}

// refused checks that TryAcquire of name by a fresh owner on l fails with
// dblock.ErrNotAcquired.
func refused(t *testing.T, l dblock.Locker, ctx context.Context, name, why string) {
	t.Helper()
	k, err := l.TryAcquire(ctx, name)
	if err == nil {
		releaseAtEnd(t, k)
		t.Fatalf("%s: TryAcquire(%q) took the lock (token %d), want dblock.ErrNotAcquired", why, name, k.Token())
	}
	if !errors.Is(err, dblock.ErrNotAcquired) {
		t.Fatalf("%s: TryAcquire(%q) = %v, want dblock.ErrNotAcquired", why, name, err)
	}
}

// free checks that a fresh owner on l can take name at once, and releases
// it; it returns the token it got.
func free(t *testing.T, l dblock.Locker, ctx context.Context, name, why string) int64 {
	t.Helper()
	k, err := l.TryAcquire(ctx, name)
	if err != nil {
		t.Fatalf("%s: TryAcquire(%q) = %v, want the lock", why, name, err)
	}
	release(t, k)
	return k.Token()
}

// isClosed reports whether ch is closed now.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitClosed waits for ch, failing the test after hangBound.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(hangBound):
		t.Fatalf("%s: not closed after %v", what, hangBound)
	}
}

// acquired is what an Acquire run in a goroutine returned.
type acquired struct {
	lock dblock.Lock
	err  error
}

// acquireAsync runs Acquire in a goroutine; a lock it gets is released
// when the test ends. ctx must end with the test (derive it from
// t.Context()).
func acquireAsync(t *testing.T, l dblock.Locker, ctx context.Context, name string, opts ...dblock.Option) <-chan acquired {
	out := make(chan acquired, 1)
	go func() {
		k, err := l.Acquire(ctx, name, opts...)
		out <- acquired{k, err}
		close(out)
	}()
	t.Cleanup(func() {
		// Wait for it (ctx, from t.Context(), has ended), so no goroutine
		// outlives the test, and release what it got if await did not.
		if r, ok := <-out; ok && r.lock != nil {
			_ = r.lock.Release(context.Background())
		}
	})
	return out
}

// await returns what acquireAsync's Acquire returned, failing the test
// after hangBound; a lock it got is released when the test ends.
func await(t *testing.T, ch <-chan acquired) acquired {
	t.Helper()
	select {
	case r := <-ch:
		if r.lock != nil {
			releaseAtEnd(t, r.lock)
		}
		return r
	case <-time.After(hangBound):
		t.Fatalf("Acquire did not return within %v", hangBound)
		return acquired{}
	}
}
