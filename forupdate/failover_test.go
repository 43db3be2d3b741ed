package forupdate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestFailoverPauseRule: forupdate's side of the failover pause (rowlock's
// failover.go has the rule), on a schema of its own whose timelines table
// says what a promotion leaves: an earlier timeline recorded, the
// server's own not yet. Then a write or read lock is not taken (TryAcquire:
// not acquired), and the first try records the timeline; a Locker with the
// pause off takes; an Acquire waits until the database clock has passed
// first_seen + P, and takes then. (internal/failover tests a real
// promotion.)
func TestFailoverPauseRule(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		if tg.Dialect != dblock.Postgres {
			continue
		}
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			own := testdb.Migrated(t, tg, "sqllock_fu_failover")
			const pause = time.Hour // ended by the test, by moving first_seen back
			l := newLocker(t, own.DB, forupdate.WithFailoverPause(pause))
			off := newLocker(t, own.DB, forupdate.WithFailoverPause(0))
			exec := func(q string, args ...any) {
				t.Helper()
				if _, err := own.DB.ExecContext(ctx, q, args...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			var timeline int64
			if err := own.DB.QueryRowContext(ctx, `SELECT `+lockkit.PgTimeline).Scan(&timeline); err != nil {
				t.Fatal(err)
			}
			release(t, acquire(t, ctx, l, "before"))

			exec(`DELETE FROM dblock_timelines`)
			exec(`INSERT INTO dblock_timelines VALUES ($1 - 1, now())`, timeline)
			sem, err := l.Semaphore(2)
			if err != nil {
				t.Fatal(err)
			}
			for _, side := range []dblock.Locker{l, l.Writers(), l.Readers(), sem} {
				for _, name := range []string{"before", "fresh"} {
					if k, err := side.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
						if k != nil {
							_ = k.Release(ctx)
						}
						t.Fatalf("TryAcquire(%q) in the pause = %v, want ErrNotAcquired", name, err)
					}
				}
			}
			var recorded bool
			if err := own.DB.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM dblock_timelines WHERE timeline = $1)`, timeline).Scan(&recorded); err != nil || !recorded {
				t.Fatalf("the first take on the new timeline did not record it (%v)", err)
			}
			release(t, acquire(t, ctx, off, "before"))

			// An Acquire of a lock, and of a permit, waits the pause out:
			// half a second left.
			for _, side := range []dblock.Locker{l, sem} {
				exec(`UPDATE dblock_timelines SET first_seen = clock_timestamp() - $1::bigint * interval '1 microsecond' WHERE timeline = $2`,
					(pause - 500*time.Millisecond).Microseconds(), timeline)
				k, err := side.Acquire(ctx, "before")
				if err != nil {
					t.Fatalf("Acquire through the pause: %v", err)
				}
				var over bool
				if err := own.DB.QueryRowContext(ctx, `SELECT clock_timestamp() >= first_seen + $1::bigint * interval '1 microsecond' FROM dblock_timelines WHERE timeline = $2`,
					pause.Microseconds(), timeline).Scan(&over); err != nil || !over {
					t.Fatalf("Acquire returned before the pause ended by the database clock (%v)", err)
				}
				release(t, k)
			}
		})
	}
}
