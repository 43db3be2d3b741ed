package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

// TryAcquireRetry tries a few times with growing, jittered pauses: more
// patient than TryAcquire, bounded unlike Acquire. A database that cannot
// be reached is reported at once, as ErrUnavailable.
func ExampleTryAcquireRetry() {
	ctx := context.Background()
	dsn := os.Getenv("SQLLOCK_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://root@127.0.0.1:5432/test"
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if err := migrations.Up(ctx, db); err != nil {
		panic(err)
	}
	locker, err := rowlock.New(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	// Three attempts, 50 ms then 100 ms apart (each pause jittered
	// between half and all of it).
	retry := dblock.Retry{Attempts: 3, Backoff: 50 * time.Millisecond, MaxBackoff: time.Second}
	name := fmt.Sprintf("example/retry/%d", time.Now().UnixNano())

	lock, err := dblock.TryAcquireRetry(ctx, locker, name, retry, dblock.TTL(15*time.Second))
	if err != nil {
		panic(err)
	}
	fmt.Println("first owner holds it:", lock.Name() == name)

	// Another owner (a context without one gets a fresh one) gives up
	// after its three attempts.
	_, err = dblock.TryAcquireRetry(ctx, locker, name, retry)
	switch {
	case errors.Is(err, dblock.ErrNotAcquired):
		fmt.Println("second owner:", err)
	case errors.Is(err, dblock.ErrUnavailable):
		fmt.Println("database unavailable, try later:", err)
	case err != nil:
		panic(err)
	}

	if err := lock.Release(ctx); err != nil {
		panic(err)
	}
	// Output:
	// first owner holds it: true
	// second owner: dblock: not acquired (3 attempts)
}
