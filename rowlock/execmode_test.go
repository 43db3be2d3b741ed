package rowlock_test

import (
	"context"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// BenchmarkExecMode compares pgx's exec modes, and the one sqllock picks
// for the path (pgxrow.DB), for an uncontended TryAcquire+Release, directly
// and through PgBouncer, interleaved in one loop (testdb.BenchExecModes):
// what sqllock picks must cost no more than pgx's default directly, and
// work through the pooler. The context can be canceled, as callers'
// usually can: the take then runs through pgx itself (pgxrow.DB.Scan).
func BenchmarkExecMode(b *testing.B) {
	if testdb.LeftOut(b, "postgres") {
		return
	}
	targets := []testdb.Target{testdb.PgBouncer(b)}
	for _, tg := range testdb.Targets(b) {
		if tg.Dialect == dblock.Postgres {
			targets = append(targets, tg)
		}
	}
	for _, tg := range targets {
		b.Run(tg.Name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			l := newLocker(b, tg.DB)
			name := testdb.Name(b)
			testdb.BenchExecModes(b, tg, func() error {
				k, err := l.TryAcquire(ctx, name)
				if err != nil {
					return err
				}
				return k.Release(ctx)
			})
		})
	}
}
