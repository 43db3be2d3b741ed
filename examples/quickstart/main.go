// Command quickstart writes under a lock, one replica at a time. Give it a
// DSN in the form its driver takes (postgres://user:password@host/dbname,
// user:password@tcp(host:3306)/dbname); without one it uses an SQLite file,
// which locks the processes of one host only.
package main

import (
	"context"
	"database/sql"
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

// driverFor picks the driver of dsn. Your program knows its database.
func driverFor(dsn string) string {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return "pgx"
	case strings.HasPrefix(dsn, "file:"):
		return "sqlite"
	}
	return "mysql"
}

func run(ctx context.Context, dsn string) error {
	db, err := sql.Open(driverFor(dsn), dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	// Creates or upgrades the lock tables; safe on every replica at once.
	if err := migrations.Up(ctx, db); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS quickstart_runs (note VARCHAR(100) NOT NULL)"); err != nil {
		return err
	}
	locker, err := rowlock.New(db) // never closes db
	if err != nil {
		return err
	}
	defer locker.Close()

	// Waits while another replica holds the lock; renewed while held.
	lock, err := locker.Acquire(ctx, "reports/nightly", dblock.TTL(30*time.Second))
	if err != nil {
		return err
	}
	defer lock.Release(context.WithoutCancel(ctx))

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// A holder paused past its lease (a GC pause, a slow host) may have
	// lost the lock: the check fails with dblock.ErrLockLost, and no one
	// can take the lock over until tx ends.
	if err := dblock.CheckHeld(ctx, lock, tx); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO quickstart_runs (note) VALUES ('nightly report')"); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	fmt.Println("wrote under the lock, fencing token", lock.Token())
	return nil
}
