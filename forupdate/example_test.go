package forupdate_test

import (
	"context"
	"errors"
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

// At most two replicas call a rate-limited API at once; each permit is a
// slot row held by a transaction, which a replica's death frees at once.
func ExampleLocker_Semaphore() {
	ctx := context.Background()
	db := testdb.ExampleDB()
	defer db.Close()
	locker, err := forupdate.New(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	apiCalls, err := locker.Semaphore(2)
	if err != nil {
		panic(err)
	}
	name := fmt.Sprintf("example/partner-api/%d", time.Now().UnixNano())
	first, err := apiCalls.Acquire(ctx, name)
	if err != nil {
		panic(err)
	}
	err = dblock.Do(ctx, apiCalls, name, func(ctx context.Context) error {
		// Both permits are taken now.
		_, err := apiCalls.TryAcquire(context.Background(), name)
		fmt.Println("a third caller:", err)
		return nil
	})
	fmt.Println("Do:", err)

	// Everyone must agree on the limit while permits are held.
	threeCalls, err := locker.Semaphore(3)
	if err != nil {
		panic(err)
	}
	_, err = threeCalls.TryAcquire(ctx, name)
	fmt.Println("another limit:", errors.Is(err, dblock.ErrLimitMismatch))
	fmt.Println("release:", first.Release(ctx))
	// Output:
	// a third caller: dblock: not acquired
	// Do: <nil>
	// another limit: true
	// release: <nil>
}

// Readers share a name, a writer has it alone; a writer's token is above
// every token handed out before it.
func ExampleLocker_Readers() {
	ctx := context.Background()
	db := testdb.ExampleDB()
	defer db.Close()
	locker, err := forupdate.New(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()
	name := fmt.Sprintf("example/config/%d", time.Now().UnixNano())

	r1, err := locker.Readers().Acquire(ctx, name)
	if err != nil {
		panic(err)
	}
	r2, err := locker.Readers().TryAcquire(ctx, name)
	fmt.Println("second reader:", err)
	_, err = locker.Writers().TryAcquire(ctx, name)
	fmt.Println("writer while read:", err)
	// The first reader cannot upgrade: that would wait for itself.
	_, err = locker.Writers().Acquire(r1.Context(), name)
	fmt.Println("upgrade:", errors.Is(err, dblock.ErrUpgrade))
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)

	w, err := locker.Writers().Acquire(ctx, name)
	if err != nil {
		panic(err)
	}
	fmt.Println("writer's token above the readers':", w.Token() > max(r1.Token(), r2.Token()))
	fmt.Println("release:", w.Release(ctx))
	// Output:
	// second reader: <nil>
	// writer while read: dblock: not acquired
	// upgrade: true
	// writer's token above the readers': true
	// release: <nil>
}
