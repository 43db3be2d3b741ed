package dblocktest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/dblocktest"
)

// A semaphore of two permits stands for rowlock's in a unit test: two
// replicas call the API at once, the third is refused, and a test makes a
// permit's lease lapse to check that its holder stops.
func ExampleLocker_Semaphore() {
	ctx := context.Background()
	locker := dblocktest.NewLocker()
	api, err := locker.Semaphore(2)
	if err != nil {
		panic(err)
	}

	first, _ := api.TryAcquire(ctx, "partner-api")
	second, _ := api.TryAcquire(ctx, "partner-api")
	_, err = api.TryAcquire(ctx, "partner-api")
	fmt.Println("third replica:", errors.Is(err, dblock.ErrNotAcquired))
	fmt.Println("slots:", first.(*dblocktest.Permit).Slot(), second.(*dblocktest.Permit).Slot())

	// Every holder agrees on the limit.
	three, _ := locker.Semaphore(3)
	_, err = three.TryAcquire(ctx, "partner-api")
	fmt.Println("another limit:", errors.Is(err, dblock.ErrLimitMismatch))

	locker.Lapse("partner-api") // every permit of the name is lost
	<-first.Done()
	fmt.Println("lost:", errors.Is(first.Err(), dblock.ErrLockLost), errors.Is(second.Err(), dblock.ErrLockLost))
	// Output:
	// third replica: true
	// slots: 0 1
	// another limit: true
	// lost: true true
}

// Readers share a read/write lock, a writer excludes them; a reader that
// asks to write is refused at once, as with rowlock.
func ExampleLocker_Readers() {
	ctx := context.Background()
	locker := dblocktest.NewLocker()
	readers, writers := locker.Readers(), locker.Writers()

	r1, _ := readers.TryAcquire(ctx, "config")
	r2, _ := readers.TryAcquire(ctx, "config")
	_, err := writers.TryAcquire(ctx, "config")
	fmt.Println("writer while two read:", errors.Is(err, dblock.ErrNotAcquired))

	_, err = writers.TryAcquire(r1.Context(), "config") // r1's owner
	fmt.Println("upgrade:", errors.Is(err, dblock.ErrUpgrade))

	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	w, _ := writers.TryAcquire(ctx, "config")
	fmt.Println("writer alone, exclusive:", w.(*dblocktest.RWLock).Exclusive())
	_ = w.Release(ctx)

	r3, _ := readers.TryAcquire(ctx, "config")
	fmt.Println("reader's token is the last writer's:", r3.Token() == w.Token())
	_ = r3.Release(ctx)
	// Output:
	// writer while two read: true
	// upgrade: true
	// writer alone, exclusive: true
	// reader's token is the last writer's: true
}

// AcquireAll takes several names for one owner, or none: a transfer
// between two accounts locks both, whatever order the caller lists them in.
func ExampleLocker_AcquireAll() {
	ctx := context.Background()
	locker := dblocktest.NewLocker()

	held, _ := locker.TryAcquire(ctx, "accounts/b")
	_, err := locker.TryAcquireAll(ctx, []string{"accounts/b", "accounts/a"})
	fmt.Println("one held:", errors.Is(err, dblock.ErrNotAcquired))
	fmt.Println("nothing taken:", !locker.Held("accounts/a"))
	_ = held.Release(ctx)

	both, err := locker.AcquireAll(ctx, []string{"accounts/b", "accounts/a"})
	if err != nil {
		panic(err)
	}
	fmt.Println("names:", both.Names())

	locker.Lose("accounts/a", errors.New("failover")) // one lost loses all
	<-both.Done()
	fmt.Println("lost:", errors.Is(both.Err(), dblock.ErrLockLost))
	_ = both.Release(ctx)
	fmt.Println("held after Release:", locker.Held("accounts/b"))
	// Output:
	// one held: true
	// nothing taken: true
	// names: [accounts/a accounts/b]
	// lost: true
	// held after Release: false
}
