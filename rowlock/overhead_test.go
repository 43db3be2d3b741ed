package rowlock

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/testdb"
)

// BenchmarkOverhead interleaves, in one loop, an uncontended
// TryAcquire+Release with the same two statements sent raw (what the
// library's Go code adds: options, owner, the renewal goroutine, contexts)
// and with the naive lock-table recipe (a bare INSERT and DELETE: what the
// lease, reentrancy and fencing token cost on the server). It reports each
// as ns/op metrics and their ratios; the default ns/op is the sum of all
// three and means nothing on its own.
func BenchmarkOverhead(b *testing.B) {
	for _, tg := range testdb.AllTargets(b) {
		b.Run(tg.Name, func(b *testing.B) {
			ctx := context.Background()
			l, err := New(tg.DB)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			libName, ownName, naiveName := testdb.Name(b), testdb.Name(b), testdb.Name(b)
			owner := lockinput.NewOwner()
			own := ownStatements(tg, l.store, owner, ownName)
			naive := naivePair(tg.DB, tg.Dialect, naiveName)
			lib := func() error {
				k, err := l.TryAcquire(ctx, libName)
				if err != nil {
					return err
				}
				return k.Release(ctx)
			}
			// Create the rows, warm the pools and statement caches.
			for range 20 {
				for _, op := range []func() error{lib, own, naive} {
					if err := op(); err != nil {
						b.Fatal(err)
					}
				}
			}
			var spent [3]time.Duration
			ops := [3]func() error{lib, own, naive}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				for j := range ops {
					// Rotate the order so no variant always goes first.
					k := (i + j) % len(ops)
					start := time.Now()
					if err := ops[k](); err != nil {
						b.Fatal(err)
					}
					spent[k] += time.Since(start)
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(spent[0].Nanoseconds())/n, "sqllock-ns/op")
			b.ReportMetric(float64(spent[1].Nanoseconds())/n, "same-sql-ns/op")
			b.ReportMetric(float64(spent[2].Nanoseconds())/n, "insert-delete-ns/op")
			b.ReportMetric(float64(spent[0])/float64(spent[1]), "x-same-sql")
			b.ReportMetric(float64(spent[0])/float64(spent[2]), "x-insert-delete")
		})
	}
}

// ownStatements runs the store's own take and release statements directly,
// without the Locker around them.
func ownStatements(tg testdb.Target, s store, owner dblock.Owner, name string) func() error {
	ctx := context.Background()
	a := attempt{name: name, host: owner.Host, ownerID: owner.ID, ttl: dblock.DefaultTTL}
	return func() error {
		out, err := s.tryAcquire(ctx, a)
		if err != nil {
			return err
		}
		if !out.acquired {
			return fmt.Errorf("%s: not acquired", name)
		}
		_, err = s.release(ctx, holder{name: name, host: owner.Host, ownerID: owner.ID, token: out.token})
		return err
	}
}

// naivePair is the classic lock-table recipe on the same table: INSERT to
// acquire, DELETE to release.
func naivePair(db *sql.DB, d dblock.Dialect, name string) func() error {
	ctx := context.Background()
	insert := `INSERT INTO dblock_locks (name, stripe, token, owner_host, owner_id, acquired_at, min_hold_until, expires_at)
VALUES ($1, 0, 1, 'h', 'o', clock_timestamp(), clock_timestamp(), clock_timestamp() + interval '30 seconds')`
	del := `DELETE FROM dblock_locks WHERE name = $1`
	switch d {
	case dblock.MySQL:
		insert = `INSERT INTO dblock_locks (name, stripe, token, owner_host, owner_id, acquired_at, min_hold_until, expires_at)
VALUES (?, 0, 1, 'h', 'o', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 30 SECOND)`
		del = `DELETE FROM dblock_locks WHERE name = ?`
	case dblock.SQLite:
		insert = `INSERT INTO dblock_locks (name, stripe, token, owner_host, owner_id, acquired_at, min_hold_until, expires_at)
VALUES (?1, 0, 1, 'h', 'o', ` + sqNow + `, ` + sqNow + `, ` + sqNow + ` + 30000000)`
		del = `DELETE FROM dblock_locks WHERE name = ?1`
	}
	return func() error {
		if _, err := db.ExecContext(ctx, insert, name); err != nil {
			return err
		}
		_, err := db.ExecContext(ctx, del, name)
		return err
	}
}
