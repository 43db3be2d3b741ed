package leader_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/leader"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

// A Leader runs its function on one replica at a time, and campaigns again
// when it loses the leadership.
func ExampleLeader() {
	ctx, stop := context.WithCancel(context.Background())
	db := testdb.ExampleDB()
	defer db.Close()
	if err := migrations.Up(ctx, db); err != nil {
		panic(err)
	}
	locker, err := rowlock.New(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	var ld *leader.Leader
	ld, err = leader.New(locker, fmt.Sprintf("example/leader-%d", time.Now().UnixNano()),
		func(ctx context.Context) error {
			fmt.Println("leading:", ld.IsLeader(), "with a fencing token:", ld.Lock().Token() > 0)
			stop() // a real leader works until ctx is canceled
			<-ctx.Done()
			return nil
		}, leader.WithLockOptions(dblock.TTL(10*time.Second)))
	if err != nil {
		panic(err)
	}
	err = ld.Run(ctx)
	fmt.Println("stopped:", err, "leading:", ld.IsLeader())
	// Output:
	// leading: true with a fencing token: true
	// stopped: context canceled leading: false
}
