package admin_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/admin"
	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

// An operator finds who holds a lock that seems stuck, and revokes its
// lease: the holder learns it has lost the lock at its next renewal.
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
	name := fmt.Sprintf("example/admin/%d", time.Now().UnixNano())
	stuck, err := locker.Acquire(ctx, name, dblock.Note("nightly report"))
	if err != nil {
		panic(err)
	}

	a, err := admin.New(db)
	if err != nil {
		panic(err)
	}
	defer a.Close()
	h, held, err := a.Held(ctx, name)
	if err != nil {
		panic(err)
	}
	fmt.Println("held:", held, "by", h.Note)
	if _, err := a.Revoke(ctx, name); err != nil {
		panic(err)
	}
	_, held, _ = a.Held(ctx, name)
	fmt.Println("held after Revoke:", held)
	fmt.Println("holder's Refresh:", stuck.Refresh(ctx) != nil)
	// Output:
	// held: true by nightly report
	// held after Revoke: false
	// holder's Refresh: true
}
