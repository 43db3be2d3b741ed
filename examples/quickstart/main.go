// Command quickstart shows sqllock against a real database: three
// "replicas" (separate Lockers, as separate processes would have) race for
// the same job on every tick, and exactly one runs it each time.
//
//	go run ./examples/quickstart                  # local PostgreSQL
//	go run ./examples/quickstart -dialect mysql   # local MariaDB/MySQL
//	go run ./examples/quickstart -dsn 'postgres://user@host/db'
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

func main() {
	dialectFlag := flag.String("dialect", "postgres", "postgres or mysql")
	dsn := flag.String("dsn", "", "database DSN (default: the local server of -dialect)")
	ticks := flag.Int("ticks", 5, "how many ticks to run")
	flag.Parse()
	if err := run(*dialectFlag, *dsn, *ticks); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(dialectName, dsn string, ticks int) error {
	dialect, err := lockkit.ParseDialect(dialectName)
	if err != nil {
		return err
	}
	driver := "pgx"
	if dsn == "" {
		dsn = "postgres://root@127.0.0.1:5432/test"
	}
	if dialect == dblock.MySQL {
		driver = "mysql"
		if dsn == "postgres://root@127.0.0.1:5432/test" {
			dsn = "root@tcp(127.0.0.1:3306)/test"
		}
	}
	ctx := context.Background()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := migrations.Up(ctx, db); err != nil {
		return err
	}

	replicas := make([]*rowlock.Locker, 3)
	for i := range replicas {
		if replicas[i], err = rowlock.New(db); err != nil {
			return err
		}
		defer replicas[i].Close()
	}
	job := fmt.Sprintf("quickstart/report/%d", time.Now().UnixNano())
	for tick := 1; tick <= ticks; tick++ {
		var ran atomic.Int32
		var wg sync.WaitGroup
		for i, l := range replicas {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("%s/tick-%d", job, tick)
				// MinHold keeps a replica whose timer fires late from
				// running the same tick again after a fast winner released.
				lock, err := l.TryAcquire(ctx, name, dblock.TTL(10*time.Second), dblock.MinHold(2*time.Second))
				if errors.Is(err, dblock.ErrNotAcquired) {
					return
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "replica", i, err)
					return
				}
				defer lock.Release(ctx)
				ran.Add(1)
				fmt.Printf("tick %d: replica %d runs the job (fencing token %d)\n", tick, i, lock.Token())
			}()
		}
		wg.Wait()
		if ran.Load() != 1 {
			return fmt.Errorf("tick %d ran %d times", tick, ran.Load())
		}
	}
	fmt.Printf("%d ticks, each run exactly once on %s\n", ticks, dialect)
	return nil
}
