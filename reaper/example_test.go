package reaper_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/reaper"
	"github.com/sqllock/sqllock/rowlock"
)

// Every replica starts a reaper next to its Locker; one of them sweeps at
// each scheduled time, the others skip.
func Example() {
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

	r, err := reaper.New(locker, reaper.WithSchedule("@every 5m"))
	if err != nil {
		panic(err)
	}
	r.Start()

	// ... the application runs ...

	// On shutdown: the sweep in flight, if any, ends after its batch.
	<-r.Stop().Done()
	fmt.Println("reaper stopped")
	// Output:
	// reaper stopped
}

// RunOnce sweeps now, for a one-off clean-up or a job scheduled elsewhere
// (`sqllock reap` runs it from a shell).
func ExampleReaper_RunOnce() {
	ctx := context.Background()
	db := testdb.ExampleDB()
	defer db.Close()
	locker, err := rowlock.New(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	held, err := locker.TryAcquire(ctx, fmt.Sprintf("example/reaper/%d", time.Now().UnixNano()))
	if err != nil {
		panic(err)
	}
	defer held.Release(ctx)

	r, err := reaper.New(locker)
	if err != nil {
		panic(err)
	}
	res, err := r.RunOnce(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("skipped:", res.Skipped)
	fmt.Println("held lock still held:", held.Err() == nil)
	// Output:
	// skipped: false
	// held lock still held: true
}
