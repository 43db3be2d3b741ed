package rowlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// At most two replicas call a rate-limited API at once. A Semaphore is a
// dblock.Locker, so dblock.Do runs a function under one of its permits.
func ExampleLocker_Semaphore() {
	ctx := context.Background()
	db := testdb.ExampleDB()
	defer db.Close()
	locker, err := rowlock.New(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	apiCalls, err := locker.Semaphore(2)
	if err != nil {
		panic(err)
	}
	name := fmt.Sprintf("example/partner-api/%d", time.Now().UnixNano())

	first, err := apiCalls.Acquire(ctx, name, dblock.TTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	err = dblock.Do(ctx, apiCalls, name, func(ctx context.Context) error {
		// Both permits are taken now.
		_, err := apiCalls.TryAcquire(context.Background(), name)
		fmt.Println("a third caller:", err)
		return nil
	})
	fmt.Println("Do:", err)

	// Everyone must agree on the limit while permits are held.
	threeCalls, err := locker.Semaphore(3)
	if err != nil {
		panic(err)
	}
	_, err = threeCalls.TryAcquire(ctx, name)
	fmt.Println("another limit:", errors.Is(err, dblock.ErrLimitMismatch))

	fmt.Println("release:", first.Release(ctx))
	// Output:
	// a third caller: dblock: not acquired
	// Do: <nil>
	// another limit: true
	// release: <nil>
}
