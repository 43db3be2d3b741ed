package forupdate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// A job that must run on one replica at a time records its work in the
// lock's own transaction: the work commits exactly when the lock is
// released, or not at all.
func Example() {
	ctx := context.Background()
	db := testdb.ExampleDB()
	defer db.Close()
	// Once, at deploy time or start-up; safe to run on every replica.
	if err := migrations.Up(ctx, db); err != nil {
		panic(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS example_runs (job text, token bigint)`); err != nil {
		panic(err)
	}

	locker, err := forupdate.New(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()
	job := fmt.Sprintf("example/billing/%d", time.Now().UnixNano())
	lock, err := locker.Acquire(ctx, job, dblock.TTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	tx := lock.(*forupdate.Lock).Tx()
	if _, err := tx.ExecContext(ctx, `INSERT INTO example_runs (job, token) VALUES ($1, $2)`, job, lock.Token()); err != nil {
		panic(err)
	}

	// Another owner (here: a context without the lock's owner) is refused.
	_, err = locker.TryAcquire(ctx, job)
	fmt.Println("someone else:", err)

	var runs int
	_ = db.QueryRowContext(ctx, `SELECT count(*) FROM example_runs WHERE job = $1`, job).Scan(&runs)
	fmt.Println("runs visible while held:", runs)

	if err := lock.Release(ctx); err != nil {
		panic(err)
	}
	_ = db.QueryRowContext(ctx, `SELECT count(*) FROM example_runs WHERE job = $1`, job).Scan(&runs)
	fmt.Println("runs visible after release:", runs)
	fmt.Println("lock:", lock.Err())
	// Output:
	// someone else: dblock: not acquired
	// runs visible while held: 0
	// runs visible after release: 1
	// lock: dblock: released
}
