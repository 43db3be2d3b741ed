package dblock_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

// Do runs a function under a lock: the function's context is canceled if
// the lock is lost, and the lock is released when it returns.
func ExampleDo() {
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

	name := fmt.Sprintf("example/do/%d", time.Now().UnixNano())
	err = dblock.Do(ctx, locker, name, func(ctx context.Context) error {
		fmt.Println("running alone")
		return nil
	}, dblock.TTL(15*time.Second))
	fmt.Println("err:", err)
	// Output:
	// running alone
	// err: <nil>
}
