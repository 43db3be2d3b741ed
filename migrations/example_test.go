package migrations_test

import (
	"context"
	"fmt"

	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// Up at start-up creates or upgrades the tables; running it again, or on
// every replica at once, changes nothing.
func ExampleUp() {
	ctx := context.Background()
	db := testdb.ExampleDB()
	defer db.Close()
	for range 2 {
		if err := migrations.Up(ctx, db); err != nil {
			panic(err)
		}
	}
	version, dirty, err := migrations.Version(ctx, db)
	fmt.Println(version == migrations.Latest, dirty, err)
	// Output:
	// true false <nil>
}
