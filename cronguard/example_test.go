package cronguard_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sqllock/sqllock/cronguard"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

// New adds robfig/cron jobs that each run once per activation across all
// replicas, each under its own lock; a job's context is canceled if its
// lock is lost.
func ExampleNew() {
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

	c := cron.New(cron.WithSeconds(), cron.WithChain(cron.Recover(cron.DefaultLogger)))
	guard, err := cronguard.New(c, locker)
	if err != nil {
		panic(err)
	}
	var once sync.Once
	done := make(chan struct{})
	report := cronguard.Job(cronguard.ContextJobFunc(func(ctx context.Context) {
		once.Do(func() {
			_, ok := cronguard.Tick(ctx)
			fmt.Println("report for this activation, on one replica:", ok)
			close(done)
		})
	}))
	// Each job under its own name: the lock's.
	name := fmt.Sprintf("example/report-%d", time.Now().UnixNano())
	if _, err := guard.AddJob(name, "* * * * * *", report); err != nil {
		panic(err)
	}
	if _, err := guard.AddJob(name, "0 * * * * *", report); err != nil {
		fmt.Println(errors.Is(err, cronguard.ErrDuplicateName))
	}
	c.Start()
	<-done
	<-c.Stop().Done()
	// Output:
	// true
	// report for this activation, on one replica: true
}
