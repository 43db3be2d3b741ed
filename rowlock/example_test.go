package rowlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

func Example() {
	ctx := context.Background()
	db := testdb.ExampleDB()
	defer db.Close()
	// Once, at deploy time or start-up; safe to run on every replica.
	if err := migrations.Up(ctx, db); err != nil {
		panic(err)
	}

	locker, err := rowlock.New(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	name := fmt.Sprintf("example/nightly-report/%d", time.Now().UnixNano())
	lock, err := locker.Acquire(ctx, name, dblock.TTL(10*time.Second), dblock.Note("report job"))
	if err != nil {
		panic(err)
	}
	fmt.Println("held, token > 0:", lock.Token() > 0)

	// Another owner (here: a context without the lock's owner) must wait.
	_, err = locker.TryAcquire(ctx, name)
	fmt.Println("someone else:", err)

	// Code running under the lock passes lock.Context() along; acquiring
	// with it re-enters instead of deadlocking.
	again, err := locker.TryAcquire(lock.Context(), name)
	fmt.Println("re-entered, same token:", err == nil && again.Token() == lock.Token())
	_ = again.Release(ctx)

	if err := lock.Release(ctx); err != nil {
		panic(err)
	}
	fmt.Println("after release:", lock.Err())
	// Output:
	// held, token > 0: true
	// someone else: dblock: not acquired
	// re-entered, same token: true
	// after release: dblock: released
}

// A holder proves, inside the transaction that writes the protected data,
// that it still holds the lock: the write commits only if no one has taken
// the lock over, and no one can until the transaction ends.
func ExampleLock_CheckHeld() {
	ctx := context.Background()
	db := testdb.ExampleDB()
	defer db.Close()
	locker, err := rowlock.New(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	name := fmt.Sprintf("example/fenced/%d", time.Now().UnixNano())
	lock, err := locker.Acquire(ctx, name)
	if err != nil {
		panic(err)
	}
	defer lock.Release(ctx)

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback()
	if err := lock.(dblock.Fencer).CheckHeld(ctx, tx); errors.Is(err, dblock.ErrLockLost) {
		fmt.Println("lost the lock: not writing")
		return
	} else if err != nil {
		panic(err)
	}
	// ... the protected writes, in tx ...
	fmt.Println("commit:", tx.Commit())
	// Output:
	// commit: <nil>
}

func ExampleLocker_Acquire_timeout() {
	ctx := context.Background()
	db := testdb.ExampleDB()
	defer db.Close()
	locker, err := rowlock.New(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	name := fmt.Sprintf("example/busy/%d", time.Now().UnixNano())
	holder, err := locker.Acquire(ctx, name)
	if err != nil {
		panic(err)
	}
	defer holder.Release(ctx)

	waitCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = locker.Acquire(waitCtx, name)
	fmt.Println(errors.Is(err, dblock.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded))
	// Output:
	// true true
}
