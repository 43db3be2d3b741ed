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

// Many replicas read a configuration at once; one rewrites it alone. The
// writer's fencing token is above every token handed out before it.
func ExampleLocker_Writers() {
	ctx := context.Background()
	db := testdb.ExampleDB()
	defer db.Close()
	locker, err := rowlock.New(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()
	name := fmt.Sprintf("example/config/%d", time.Now().UnixNano())

	r1, err := locker.Readers().Acquire(ctx, name, dblock.TTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	r2, err := locker.Readers().TryAcquire(ctx, name)
	fmt.Println("second reader:", err)
	_, err = locker.Writers().TryAcquire(ctx, name)
	fmt.Println("writer while read:", err)

	// The owner of a read lock cannot upgrade it: that would wait for
	// itself.
	_, err = locker.Writers().Acquire(r1.Context(), name)
	fmt.Println("upgrade:", errors.Is(err, dblock.ErrUpgrade))

	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	w, err := locker.Writers().Acquire(ctx, name)
	if err != nil {
		panic(err)
	}
	fmt.Println("writer's token above the readers':", w.Token() > r1.Token())
	// A writer may read.
	r3, err := locker.Readers().TryAcquire(w.Context(), name)
	fmt.Println("read under the write:", err, r3.(*rowlock.RWLock).Exclusive())
	_ = r3.Release(ctx)
	fmt.Println("release:", w.Release(ctx))
	// Output:
	// second reader: <nil>
	// writer while read: dblock: not acquired
	// upgrade: true
	// writer's token above the readers': true
	// read under the write: <nil> false
	// release: <nil>
}
