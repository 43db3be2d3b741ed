package gocronlock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/gocronlock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/leader"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

// Every replica runs the same scheduler with a Locker over the shared
// database; each run of the job happens on one replica only.
func ExampleLocker() {
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

	cronLocker, err := gocronlock.NewLocker(locker, gocronlock.WithPrefix("example/"))
	if err != nil {
		panic(err)
	}
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(cronLocker))
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	_, err = s.NewJob(
		gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		gocron.NewTask(func() {
			fmt.Println("report sent by one replica")
			close(done)
		}),
		gocron.WithName(fmt.Sprintf("report-%d", time.Now().UnixNano())),
	)
	if err != nil {
		panic(err)
	}
	s.Start()
	<-done
	if err := s.Shutdown(); err != nil {
		panic(err)
	}
	// Output:
	// report sent by one replica
}

// With an Elector, one replica leads and runs every job; the others take
// over when it stops or dies.
func ExampleElector() {
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

	elector, err := gocronlock.NewElector(locker, fmt.Sprintf("example/leader-%d", time.Now().UnixNano()),
		leader.WithLockOptions(dblock.TTL(10*time.Second)))
	if err != nil {
		panic(err)
	}
	campaign, stopCampaign := context.WithCancel(ctx)
	campaigned := make(chan error, 1)
	go func() { campaigned <- elector.Run(campaign) }()

	s, err := gocron.NewScheduler(gocron.WithDistributedElector(elector))
	if err != nil {
		panic(err)
	}
	ran := make(chan struct{}, 1)
	_, err = s.NewJob(gocron.DurationJob(50*time.Millisecond), gocron.NewTask(func() {
		select {
		case ran <- struct{}{}:
		default:
		}
	}))
	if err != nil {
		panic(err)
	}
	s.Start()
	<-ran // runs once this replica has been elected
	fmt.Println("leader ran the job:", elector.IsLeader(ctx) == nil)

	if err := s.Shutdown(); err != nil {
		panic(err)
	}
	stopCampaign()
	fmt.Println("campaign ended:", <-campaigned)
	// Output:
	// leader ran the job: true
	// campaign ended: context canceled
}
