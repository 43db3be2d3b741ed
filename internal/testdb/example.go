package testdb

import (
	"database/sql"
	"os"
)

// ExampleDB opens the PostgreSQL server the packages' runnable examples
// run against: SQLLOCK_POSTGRES_DSN, or DefaultPostgresDSN. Examples have no
// *testing.T, so it panics where Targets would fail the test; it does not
// migrate (the examples show migrations.Up where they need it). The
// examples close their pools; Main waits for the connections to close.
func ExampleDB() *sql.DB {
	dsn := os.Getenv("SQLLOCK_POSTGRES_DSN")
	if dsn == "" {
		dsn = DefaultPostgresDSN
	}
	db, err := openDB("pgx", dsn, &exampleConns)
	if err != nil {
		panic(err)
	}
	return db
}

// exampleConns are the connections of the pools ExampleDB opened.
var exampleConns pgxConns
