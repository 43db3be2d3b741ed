package forupdate_test

import (
	"context"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
)

// BenchmarkAcquireRelease measures an uncontended Acquire+Release beside the
// raw recipe it wraps, BEGIN; SELECT ... FOR UPDATE; COMMIT, on the same
// table. The lock does more: it draws a token (on MySQL 8.0 a write, so
// the commit flushes the log where the raw transaction need not; MariaDB's
// sequence writes once per 1000 tokens) and on MySQL sets the session's
// wait_timeout, restored once Release has returned.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, tg := range targets(b) {
		b.Run(tg.Name+"/forupdate", func(b *testing.B) {
			acquireReleaseLoop(b, newLocker(b, tg.DB))
		})
		if testdb.IsMariaDB(b, tg) {
			// MySQL 8.0's way, on the MariaDB server at hand.
			b.Run(tg.Name+"/forupdate_counter_table", func(b *testing.B) {
				l := newLocker(b, tg.DB, forupdate.WithTable(counterTables(b, tg)))
				forupdate.DrawFromCounterTable(l)
				acquireReleaseLoop(b, l)
			})
		}
		b.Run(tg.Name+"/raw", func(b *testing.B) {
			name := testdb.Name(b)
			ctx := context.Background()
			// The row exists, as it does for the lock after its first use.
			release(b, acquire(b, ctx, newLocker(b, tg.DB), name))
			query := `SELECT token FROM ` + forupdate.DefaultTable + ` WHERE name = $1 FOR UPDATE`
			if tg.Dialect == dblock.MySQL {
				query = `SELECT token FROM ` + forupdate.DefaultTable + ` WHERE name = ? FOR UPDATE`
			}
			for b.Loop() {
				tx, err := tg.DB.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				var token int64
				if err := tx.QueryRowContext(ctx, query, name).Scan(&token); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// acquireReleaseLoop takes and releases one name of its own on l, b.N times.
func acquireReleaseLoop(b *testing.B, l *forupdate.Locker) {
	name := testdb.Name(b)
	ctx := context.Background()
	for b.Loop() {
		k, err := l.Acquire(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		if err := k.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
