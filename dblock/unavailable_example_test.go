package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/rowlock"
)

// ErrUnavailable tells a database that cannot be reached (retry later,
// alert) from a lock held by someone else (ErrNotAcquired), without
// matching driver errors; the driver's error stays in the chain.
func ExampleErrUnavailable() {
	ctx := context.Background()
	// Nothing listens on port 1: the connection is refused.
	db, err := sql.Open("pgx", "postgres://root@127.0.0.1:1/test?connect_timeout=5")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	locker, err := rowlock.New(db, rowlock.WithDialect(dblock.Postgres))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	_, err = locker.TryAcquire(ctx, "jobs/report")
	switch {
	case errors.Is(err, dblock.ErrUnavailable):
		fmt.Println("database unavailable: try again later")
	case errors.Is(err, dblock.ErrNotAcquired):
		fmt.Println("held by another replica")
	case err != nil:
		panic(err)
	}
	// Output:
	// database unavailable: try again later
}
