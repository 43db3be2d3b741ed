package dblocktest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/dblocktest"
)

// The in-memory Locker stands for the database in a unit test: two
// replicas of the code under test share it, as they would share the
// database, and exclude each other.
func ExampleNewLocker() {
	ctx := context.Background()
	locker := dblocktest.NewLocker()

	first, err := locker.TryAcquire(ctx, "jobs/report")
	if err != nil {
		panic(err)
	}
	_, err = locker.TryAcquire(ctx, "jobs/report") // another replica
	fmt.Println("second replica:", err)
	fmt.Println("held:", locker.Held("jobs/report"))

	if err := first.Release(ctx); err != nil {
		panic(err)
	}
	fmt.Println("held after Release:", locker.Held("jobs/report"))
	// Output:
	// second replica: dblocktest: "jobs/report": dblock: not acquired
	// held: true
	// held after Release: false
}

// A test makes the lease of a held lock lapse, as if its holder had been
// paused past its TTL: the holder's lock context ends, and another replica
// takes over with a larger fencing token.
func ExampleLocker_Lapse() {
	ctx := context.Background()
	locker := dblocktest.NewLocker()

	// The code under test: works under the lock until its context ends.
	stopped := make(chan error)
	lock, err := locker.Acquire(ctx, "jobs/indexer")
	if err != nil {
		panic(err)
	}
	go func() {
		<-lock.Context().Done()
		stopped <- context.Cause(lock.Context())
	}()

	locker.Lapse("jobs/indexer")
	cause := <-stopped
	fmt.Println("holder stopped, lost:", errors.Is(cause, dblock.ErrLockLost))

	next, err := locker.TryAcquire(ctx, "jobs/indexer")
	if err != nil {
		panic(err)
	}
	fmt.Println("taken over with a larger token:", next.Token() > lock.Token())
	fmt.Println("old holder's Release:", errors.Is(lock.Release(ctx), dblock.ErrLockLost))
	// Output:
	// holder stopped, lost: true
	// taken over with a larger token: true
	// old holder's Release: true
}

// A test makes a held lock lost with a cause of its choosing, here the
// database turned read-only by a failover: dblock.Do cancels the
// function's context, and returns the loss.
func ExampleLocker_Lose() {
	ctx := context.Background()
	locker := dblocktest.NewLocker()

	err := dblock.Do(ctx, locker, "jobs/sync", func(ctx context.Context) error {
		// In a real test, the failure comes while the code under test runs.
		locker.Lose("jobs/sync", dblock.ErrReadOnly)
		<-ctx.Done()
		return context.Cause(ctx)
	})
	fmt.Println("lost:", errors.Is(err, dblock.ErrLockLost))
	fmt.Println("read-only:", errors.Is(err, dblock.ErrReadOnly))
	// Output:
	// lost: true
	// read-only: true
}

// A test waits until the code under test is waiting for a lock before it
// releases the lock, so that it tests the waiting, not a race.
func ExampleLocker_Waiting() {
	ctx := context.Background()
	locker := dblocktest.NewLocker()
	held, err := locker.TryAcquire(ctx, "orders/42")
	if err != nil {
		panic(err)
	}

	got := make(chan dblock.Lock)
	go func() {
		k, err := locker.Acquire(ctx, "orders/42") // the code under test
		if err != nil {
			panic(err)
		}
		got <- k
	}()
	for locker.Waiting("orders/42") == 0 {
		time.Sleep(time.Millisecond)
	}
	fmt.Println("waiting:", locker.Waiting("orders/42"))

	if err := held.Release(ctx); err != nil {
		panic(err)
	}
	k := <-got
	fmt.Println("waiter holds it:", k.Err() == nil)
	_ = k.Release(ctx)
	// Output:
	// waiting: 1
	// waiter holds it: true
}

// countingLocker is a Locker of a user's own: it counts acquisitions
// around another Locker.
type countingLocker struct {
	dblock.Locker
	taken atomic.Int64
}

func (c *countingLocker) Acquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	k, err := c.Locker.Acquire(ctx, name, opts...)
	if err == nil {
		c.taken.Add(1)
	}
	return k, err
}

func (c *countingLocker) TryAcquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	k, err := c.Locker.TryAcquire(ctx, name, opts...)
	if err == nil {
		c.taken.Add(1)
	}
	return k, err
}

// A Locker of your own, here one that wraps another, is checked against
// dblock's contract by a test that runs TestLocker. An example cannot run
// a test; TestCountingLocker, in this file, is the one shown here.
func ExampleTestLocker() {
	TestCountingLocker := func(t *testing.T) {
		mem := dblocktest.NewLocker()
		dblocktest.TestLocker(t, dblocktest.Harness{
			New:  func(*testing.T) dblock.Locker { return &countingLocker{Locker: mem} },
			Lose: func(t *testing.T, k dblock.Lock) { mem.Lapse(k.Name()) },
			// The in-memory Locker's locks implement dblock.Fencer
			// without a database.
			Tx:                     func(*testing.T) *sql.Tx { return nil },
			Fair:                   true,
			MinHold:                true,
			ReentrantAcrossLockers: true,
		})
	}
	_ = TestCountingLocker
}

// TestCountingLocker is the test ExampleTestLocker shows; it also checks
// that the suite went through the wrapper.
func TestCountingLocker(t *testing.T) {
	mem := dblocktest.NewLocker()
	counting := &countingLocker{Locker: mem}
	dblocktest.TestLocker(t, dblocktest.Harness{
		New:                    func(*testing.T) dblock.Locker { return counting },
		Lose:                   func(t *testing.T, k dblock.Lock) { mem.Lapse(k.Name()) },
		Tx:                     func(*testing.T) *sql.Tx { return nil },
		Fair:                   true,
		MinHold:                true,
		ReentrantAcrossLockers: true,
	})
	if counting.taken.Load() == 0 {
		t.Error("the suite took no lock through the wrapper")
	}
}
