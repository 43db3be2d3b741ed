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

// A transfer locks both accounts, whatever order it names them in: two
// transfers between the same accounts in opposite directions take them in
// the same order and never deadlock.
func ExampleLocker_AcquireAll() {
	ctx := context.Background()
	db := testdb.ExampleDB()
	defer db.Close()
	locker, err := rowlock.New(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	run := time.Now().UnixNano()
	alice := fmt.Sprintf("example/account/alice/%d", run)
	bob := fmt.Sprintf("example/account/bob/%d", run)

	both, err := locker.AcquireAll(ctx, []string{bob, alice}, dblock.TTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	fmt.Println("held:", len(both.Names()), "names, sorted:", both.Names()[0] == alice)

	// The reverse transfer cannot take either account meanwhile, and
	// holds neither when it gives up.
	_, err = locker.TryAcquireAll(ctx, []string{alice, bob})
	fmt.Println("reverse transfer:", errors.Is(err, dblock.ErrNotAcquired))
	_, err = locker.TryAcquire(ctx, bob)
	fmt.Println("bob alone:", err)

	if err := both.Release(ctx); err != nil {
		panic(err)
	}
	fmt.Println("after release:", both.Err())
	// Output:
	// held: 2 names, sorted: true
	// reverse transfer: true
	// bob alone: dblock: not acquired
	// after release: dblock: released
}
