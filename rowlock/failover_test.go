package rowlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// pauseKind takes name by one kind of lock, at once (TryAcquire).
type pauseKind struct {
	name string
	try  func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error)
}

var pauseKinds = []pauseKind{
	{"mutex", func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
		return l.TryAcquire(ctx, name)
	}},
	{"fair", func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
		return l.TryAcquire(ctx, name, dblock.Fair())
	}},
	{"semaphore", func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
		s, err := l.Semaphore(2)
		if err != nil {
			return nil, err
		}
		return s.TryAcquire(ctx, name)
	}},
	{"writer", func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
		return l.Writers().TryAcquire(ctx, name)
	}},
	{"reader", func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
		return l.Readers().TryAcquire(ctx, name)
	}},
	{"all", func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
		m, err := l.TryAcquireAll(ctx, []string{name, name + "/2"})
		if err != nil {
			return nil, err
		}
		return m, nil
	}},
}

// TestFailoverPauseRule: the failover pause's rule (failover.go), on a
// schema of its own made to look as a promotion leaves it: a timeline
// below the server's recorded, the server's own not yet, and a lapsed row
// tokened on the timeline below. Then every kind of take is refused, fresh names and lapsed rows
// alike, and the first take records the timeline, first seen by the
// database clock; the owner's renewals go on, and so does its re-entry into
// a row tokened on this timeline, not into one of the timeline before; a Locker with
// the pause off takes. Once the database clock has passed first_seen + P,
// every kind takes again, and an Acquire that waited through the pause
// gets the lock no sooner. With no earlier timeline recorded, a row tokened
// on an older timeline still counts as one. A hold's belief is at most P
// less a tenth, whatever its TTL. (internal/failover tests the pause
// across a real promotion.)
func TestFailoverPauseRule(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		if tg.Dialect != dblock.Postgres {
			continue
		}
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			own := testdb.Migrated(t, tg, "sqllock_failover")
			// A pause that cannot end while the test runs: the test ends it
			// by moving first_seen back, by the database clock.
			const pause = time.Hour
			l := newLocker(t, own.DB, rowlock.WithCrashGrace(0), rowlock.WithFailoverPause(pause))
			off := newLocker(t, own.DB, rowlock.WithCrashGrace(0), rowlock.WithFailoverPause(0))
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

			// Before: the migration recorded this timeline, nothing waits.
			held := mustTry(t, l, "held")
			lapsed := mustTry(t, l, "lapsed")
			release(t, lapsed)
			heldCtx := held.Context()
			back := mustTry(t, l, "back")
			backCtx := back.Context()
			// Its token is changed under it below: its release is refused.
			defer func() { _ = back.Release(ctx) }()

			// A promotion: an earlier timeline recorded, this one not.
			exec(`DELETE FROM dblock_timelines`)
			exec(`INSERT INTO dblock_timelines VALUES ($1 - 1, now())`, timeline)
			// Rows the old primary wrote carry its timeline's tokens.
			exec(`UPDATE dblock_locks SET token = (($1 - 1) << 40) + 5, session_token = (($1 - 1) << 40) + 5 WHERE name = 'lapsed'`, timeline)
			for _, kd := range pauseKinds {
				for _, name := range []string{"fresh-" + kd.name, "lapsed"} {
					k, err := kd.try(ctx, l, name)
					if !errors.Is(err, dblock.ErrNotAcquired) {
						if k != nil {
							_ = k.Release(ctx)
						}
						t.Fatalf("%s: TryAcquire(%q) in the pause = %v, want ErrNotAcquired", kd.name, name, err)
					}
				}
			}
			var firstSeen, now int64
			if err := own.DB.QueryRowContext(ctx, `SELECT (extract(epoch FROM first_seen) * 1e6)::bigint, (extract(epoch FROM clock_timestamp()) * 1e6)::bigint
FROM dblock_timelines WHERE timeline = $1`, timeline).Scan(&firstSeen, &now); err != nil {
				t.Fatalf("the first take on the new timeline did not record it: %v", err)
			}
			if firstSeen > now {
				t.Fatalf("first_seen %d after the database's now %d", firstSeen, now)
			}
			// A row the promoted server brought back with its old owner
			// (a release it lost): its owner's re-entry waits too.
			exec(`UPDATE dblock_locks SET token = (($1 - 1) << 40) + 9, session_token = (($1 - 1) << 40) + 9 WHERE name = 'back'`, timeline)
			if k, err := l.TryAcquire(backCtx, "back"); !errors.Is(err, dblock.ErrNotAcquired) {
				if k != nil {
					_ = k.Release(ctx)
				}
				t.Fatalf("re-entry into a row of an earlier timeline in the pause = %v, want ErrNotAcquired", err)
			}
			// The holder of a row tokened on this timeline re-enters and
			// renews in the pause.
			inner, err := l.TryAcquire(heldCtx, "held")
			if err != nil {
				t.Fatalf("re-entry in the pause: %v", err)
			}
			release(t, inner)
			if err := held.Refresh(ctx); err != nil {
				t.Fatalf("renewal in the pause: %v", err)
			}
			// Off: no pause.
			release(t, mustTry(t, off, "lapsed"))

			// An Acquire waits the pause out: half a second left.
			exec(`UPDATE dblock_timelines SET first_seen = clock_timestamp() - $1::bigint * interval '1 microsecond' WHERE timeline = $2`,
				(pause - 500*time.Millisecond).Microseconds(), timeline)
			if err := own.DB.QueryRowContext(ctx, `SELECT (extract(epoch FROM first_seen) * 1e6)::bigint FROM dblock_timelines WHERE timeline = $1`, timeline).Scan(&firstSeen); err != nil {
				t.Fatal(err)
			}
			waited, err := l.Acquire(ctx, "waited")
			if err != nil {
				t.Fatalf("Acquire through the pause: %v", err)
			}
			if at := acquiredAtMicros(t, own, "waited"); at < firstSeen+pause.Microseconds() {
				t.Fatalf("Acquire took the lock at %d, before the pause's end %d", at, firstSeen+pause.Microseconds())
			}
			release(t, waited)
			for _, kd := range pauseKinds {
				k, err := kd.try(ctx, l, "after-"+kd.name)
				if err != nil {
					t.Fatalf("%s: TryAcquire after the pause: %v", kd.name, err)
				}
				release(t, k)
			}

			// No earlier timeline recorded, nor this one: a fresh name and
			// a row of this timeline are taken, a row tokened on an older
			// timeline waits (the first take records this timeline).
			exec(`DELETE FROM dblock_timelines`)
			release(t, mustTry(t, l, "fresh-again"))
			release(t, mustTry(t, l, "lapsed"))
			exec(`UPDATE dblock_locks SET token = 7, session_token = 7 WHERE name = 'lapsed'`)
			if k, err := l.TryAcquire(ctx, "lapsed"); !errors.Is(err, dblock.ErrNotAcquired) {
				if k != nil {
					_ = k.Release(ctx)
				}
				t.Fatalf("takeover of a row of an older timeline, none recorded = %v, want ErrNotAcquired", err)
			}
			release(t, held)

			// Belief: at most P less a tenth, whatever the TTL.
			const short = 2 * time.Second
			capped := newLocker(t, own.DB, rowlock.WithCrashGrace(0), rowlock.WithFailoverPause(short))
			exec(`UPDATE dblock_timelines SET first_seen = '-infinity'`)
			long, err := capped.TryAcquire(ctx, "long", dblock.TTL(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			defer release(t, long)
			if got := long.(*rowlock.Lock).TTL(); got > short-short/10 {
				t.Fatalf("TTL() of a one-hour hold with a pause of %v = %v, want at most %v", short, got, short-short/10)
			}
		})
	}
}

// TestFailoverPauseOption: a pause below dblock.MinTTL, or negative, is
// refused by New; 0 is off.
func TestFailoverPauseOption(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			for _, d := range []time.Duration{-time.Second, time.Millisecond} {
				_, err := rowlock.New(tg.DB, rowlock.WithFailoverPause(d))
				var oe *dblock.OptionError
				if !errors.As(err, &oe) || oe.Option != "WithFailoverPause" {
					t.Errorf("New(WithFailoverPause(%v)) = %v, want an *OptionError for WithFailoverPause", d, err)
				}
			}
			newLocker(t, tg.DB, rowlock.WithFailoverPause(0))
		})
	}
}
