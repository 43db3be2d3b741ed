// Command quickstart runs a job under a distributed lock: copy it to start
// your own. Give it your database's DSN, in the form its Go driver takes:
//
//	go run ./examples/quickstart 'postgres://user:password@host:5432/dbname'
//	go run ./examples/quickstart 'user:password@tcp(host:3306)/dbname'
//	go run ./examples/quickstart 'file:locks.db?_pragma=busy_timeout(5000)'
//
// The sqllock CLI takes the first two as they are, and mysql:// URLs, which
// Go's MySQL driver does not; for SQLite it takes sqlite:FILE. Without a
// DSN the program uses an SQLite file in the temporary directory, which
// locks the processes of one host only.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql" // "mysql": user:password@tcp(host:3306)/dbname
	_ "github.com/jackc/pgx/v5/stdlib" // "pgx": postgres://user:password@host:5432/dbname
	_ "modernc.org/sqlite"             // "sqlite": file:locks.db?_pragma=busy_timeout(5000)

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

func main() {
	dsn := "file:" + filepath.Join(os.TempDir(), "sqllock-quickstart.db") + "?_pragma=busy_timeout(5000)"
	if len(os.Args) > 1 {
		dsn = os.Args[1]
	}
	if err := run(context.Background(), dsn); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// driverFor picks the database/sql driver of dsn. Your program knows its
// database: it calls sql.Open with that one driver.
func driverFor(dsn string) string {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return "pgx"
	case strings.HasPrefix(dsn, "file:"):
		return "sqlite" // the DSN must set a busy timeout, as above
	}
	return "mysql"
}

func run(ctx context.Context, dsn string) error {
	db, err := sql.Open(driverFor(dsn), dsn)
	if err != nil {
		return err
	}
	defer db.Close()

	// Once per deploy (safe to run concurrently on every replica); the
	// dialect is detected from the driver.
	if err := migrations.Up(ctx, db); err != nil {
		return err
	}

	locker, err := rowlock.New(db) // never closes db
	if err != nil {
		return err
	}
	defer locker.Close()

	// Run the job on one replica at a time: the others wait here.
	err = dblock.Do(ctx, locker, "jobs/nightly-report", func(ctx context.Context) error {
		// ctx is canceled if the lock is lost: stop writing then.
		fmt.Println("the nightly report runs under the lock")
		return nil
	}, dblock.TTL(30*time.Second))
	if err != nil {
		return err
	}

	// Or skip the job while another replica runs it, holding the lock by
	// hand.
	lock, err := locker.TryAcquire(ctx, "jobs/cleanup")
	if errors.Is(err, dblock.ErrNotAcquired) {
		fmt.Println("the cleanup runs elsewhere")
		return nil
	}
	if err != nil {
		return err
	}
	defer func() {
		// A context of its own: the job's may have ended by now.
		releaseCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = lock.Release(releaseCtx)
	}()
	fmt.Println("the cleanup runs under the lock, fencing token", lock.Token())
	return nil
}
