package leader_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/leader"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

// A replica that only follows asks who leads: the value the leader
// advertises (here the address to send writes to) and its term's token.
func ExampleLeader_Leader() {
	ctx := context.Background()
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
	name := fmt.Sprintf("example/leader-leader-%d", time.Now().UnixNano())

	follower, err := leader.New(locker, name, nil) // never Run: it only asks
	if err != nil {
		panic(err)
	}
	_, err = follower.Leader(ctx)
	fmt.Println("before any election:", errors.Is(err, leader.ErrNoLeader))

	runCtx, stop := context.WithCancel(ctx)
	elected := make(chan int64)
	var ld *leader.Leader
	ld, err = leader.New(locker, name, func(ctx context.Context) error {
		elected <- ld.Lock().Token()
		<-ctx.Done()
		return nil
	}, leader.WithValue("http://10.0.0.7:8080"))
	if err != nil {
		panic(err)
	}
	ran := make(chan error)
	go func() { ran <- ld.Run(runCtx) }()
	token := <-elected

	info, err := follower.Leader(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("leader:", info.Value, "in the term with token", info.Token == token)
	stop()
	<-ran
	// Output:
	// before any election: true
	// leader: http://10.0.0.7:8080 in the term with token true
}

// Observe reports each change of leadership, and a name left without a
// leader (Token 0).
func ExampleLeader_Observe() {
	ctx, cancel := context.WithCancel(context.Background())
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
	name := fmt.Sprintf("example/leader-observe-%d", time.Now().UnixNano())

	follower, err := leader.New(locker, name, nil, leader.WithObserveInterval(100*time.Millisecond))
	if err != nil {
		panic(err)
	}
	infos, err := follower.Observe(ctx)
	if err != nil {
		panic(err)
	}
	show := func(info leader.Info) {
		if info.Token == 0 {
			fmt.Println("no leader")
			return
		}
		fmt.Println("leader:", info.Value)
	}
	show(<-infos)

	ld, err := leader.New(locker, name, nil, leader.WithValue("replica-a"))
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- ld.Run(runCtx) }()
	show(<-infos)
	stop() // replica-a stops campaigning and releases the leadership
	<-ran
	show(<-infos)

	cancel()
	for range infos { // closed once Observe's goroutine has ended
	}
	// Output:
	// no leader
	// leader: replica-a
	// no leader
}

// Resign hands the leadership over without ending Run: the replica sits
// out for the resign pause, and another one takes over.
func ExampleLeader_Resign() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
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
	name := fmt.Sprintf("example/leader-resign-%d", time.Now().UnixNano())

	elected := make(chan string)
	ended := make(chan error, 1)
	replica := func(value string) *leader.Leader {
		ld, err := leader.New(locker, name, func(ctx context.Context) error {
			elected <- value
			<-ctx.Done()
			if value == "a" {
				ended <- context.Cause(ctx)
			}
			return nil
		}, leader.WithValue(value))
		if err != nil {
			panic(err)
		}
		return ld
	}
	a, b := replica("a"), replica("b")
	ran := make(chan error, 2)
	go func() { ran <- a.Run(ctx) }()
	fmt.Println("elected:", <-elected)
	go func() { ran <- b.Run(ctx) }()

	if err := a.Resign(ctx); err != nil {
		panic(err)
	}
	fmt.Println("a's term ended:", <-ended)
	fmt.Println("elected:", <-elected)
	fmt.Println("a leads:", a.IsLeader(), "b leads:", b.IsLeader())

	cancel() // a is still running: it was sitting out its resign pause
	fmt.Println(<-ran, <-ran)
	// Output:
	// elected: a
	// a's term ended: leader: resigned
	// elected: b
	// a leads: false b leads: true
	// context canceled context canceled
}
