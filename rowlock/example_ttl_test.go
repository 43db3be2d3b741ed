package rowlock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// A holder working in steps checks, before each, that enough of the lease
// is left for it. TTL is a lower bound the database agrees with: the row
// stays the holder's at least that long, unless a renewal succeeds and
// moves it on (the background renewal does, every lease/3).
func ExampleLock_TTL() {
	ctx := context.Background()
	db := testdb.ExampleDB()
	defer db.Close()
	locker, err := rowlock.New(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	name := fmt.Sprintf("example/ttl/%d", time.Now().UnixNano())
	lock, err := locker.Acquire(ctx, name, dblock.TTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	k := lock.(*rowlock.Lock)
	const step = time.Second
	if left := k.TTL(); left > step {
		fmt.Println("enough lease left for the next step; at most 9 s of 10:", left <= 9*time.Second)
	}

	if err := lock.Release(ctx); err != nil {
		panic(err)
	}
	fmt.Println("after release:", k.TTL())
	// Output:
	// enough lease left for the next step; at most 9 s of 10: true
	// after release: 0s
}
