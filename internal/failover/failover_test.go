package failover_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestSwitchover: holders of every kind on the primary, after tokens taken
// on other names; the standby, still a standby, refuses every kind with
// ErrReadOnly; then a planned switchover (the standby caught up, the
// primary stopped fast, the standby promoted), in a fraction of the
// holders' lease. The same Lockers, over the same pool, go on working on
// the promoted server:
//
//   - a rowlock holder keeps its lock, whose row was replicated: its
//     renewals reach the new primary, and nobody else can take the lock
//     until it is released;
//   - a forupdate holder loses its lock, whose transaction ended with the
//     old primary: Done closes with ErrLockLost, caused by the shutdown,
//     and its transaction runs nothing more;
//   - every name, the held ones included, gets tokens on the new primary
//     larger than every token before the switchover.
//
// Calls right after the switchover may fail once per pooled connection to
// the old primary (see staleConns), and only so.
func TestSwitchover(t *testing.T) {
	if testdb.LeftOut(t, "postgres") {
		return
	}
	ctx := t.Context()
	r := testdb.NewReplicated(t)
	// The users' pool: both servers, target_session_attrs=read-write.
	db := testdb.Open(t, r.Target, r.Target.DSN)
	standby := testdb.Open(t, r.Target, r.StandbyDSN())

	type side struct {
		kind
		l      dblock.Locker
		last   map[string]int64 // each name's last token before the switchover
		holder dblock.Lock
	}
	sides := make([]*side, 0, len(kinds))
	for _, kd := range kinds {
		s := &side{kind: kd, l: kd.newLocker(t, db), last: map[string]int64{}}
		for range tokenNames {
			name := testdb.Name(t)
			s.last[name] = takeTokens(t, ctx, s.l, name, tokensEach, 0, kd.opts, nil)
		}
		k, err := s.l.TryAcquire(ctx, testdb.Name(t), append(kd.opts, dblock.TTL(keptTTL))...)
		if err != nil {
			t.Fatalf("%s: TryAcquire: %v", kd.name, err)
		}
		t.Cleanup(func() { _ = k.Release(context.Background()) })
		s.holder, s.last[k.Name()] = k, k.Token()

		onStandby := kd.newLocker(t, standby)
		for _, name := range []string{k.Name(), testdb.Name(t)} {
			_, err := onStandby.TryAcquire(ctx, name, kd.opts...)
			wantReadOnly(t, kd.name+": TryAcquire", err)
			// Acquire does not wait: retrying cannot help.
			waitCtx, cancel := context.WithTimeout(ctx, bound)
			_, err = onStandby.Acquire(waitCtx, name, kd.opts...)
			cancel()
			wantReadOnly(t, kd.name+": Acquire", err)
		}
		sides = append(sides, s)
	}

	// Idle connections to the primary, as a busy application's pool has.
	warm(t, db, pooled)
	stopped := time.Now()
	r.StopPrimary(t)
	sc := staleAfterStop(db)
	r.Promote(t)
	outage := time.Since(stopped)
	// The test's own reads go through a pool on the new primary only.
	fresh := testdb.Open(t, r.Target, r.Target.DSN)
	// Where the rowlock holders' leases end as the new primary starts.
	leaseEnds := map[dblock.Lock]int64{}
	for _, s := range sides {
		if s.keepsLock {
			leaseEnds[s.holder] = expiresAt(t, fresh, s.holder.Name())
		}
	}

	for _, s := range sides {
		t.Run(s.name, func(t *testing.T) {
			k := s.holder
			kept := s.keepsLock
			if kept {
				err := k.Err()
				switch {
				case err != nil && outage >= keptOutage:
					// The switchover outlasted what a holder can bridge
					// (a loaded machine): losing the lock is right then,
					// for the lease's reason only.
					if !errors.Is(err, dblock.ErrLockLost) || !strings.Contains(err.Error(), "not renewed in time") {
						t.Fatalf("holder after a %v switchover: %v, want ErrLockLost for a lease not renewed in time", outage, err)
					}
					t.Logf("the switchover took %v (a holder bridges %v): the holder let its lock go, as it must", outage, keptOutage)
					kept = false
				case err != nil:
					t.Fatalf("holder after a %v switchover: %v, want still held: its row is on the new primary", outage, err)
				}
			}
			// The other names first, while the pool may still have
			// connections to the old primary.
			for name, last := range s.last {
				if name != k.Name() {
					takeTokens(t, ctx, s.l, name, tokensEach, last, s.opts, sc)
				}
			}
			switch {
			case kept:
				// The background renewal reaches the new primary: the lease
				// there moves on.
				for deadline := time.Now().Add(bound); expiresAt(t, fresh, k.Name()) == leaseEnds[k]; {
					if err := k.Err(); err != nil {
						t.Fatalf("holder lost its lock waiting for a renewal on the new primary: %v", err)
					}
					if time.Now().After(deadline) {
						t.Fatalf("no renewal reached the new primary in %v", bound)
					}
					time.Sleep(20 * time.Millisecond)
				}
				sc.do(t, "Refresh", func() error { return k.Refresh(ctx) })
				// Another owner cannot take it.
				sc.do(t, "TryAcquire by another owner", func() error {
					other, err := s.l.TryAcquire(ctx, k.Name(), s.opts...)
					if err == nil {
						t.Fatalf("another owner took %q (token %d) from a live holder (token %d)", k.Name(), other.Token(), k.Token())
					}
					if errors.Is(err, dblock.ErrNotAcquired) {
						return nil
					}
					return err
				})
				sc.do(t, "Release", func() error { return k.Release(ctx) })
			case s.keepsLock: // lost over a long switchover (above)
				if err := k.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
					t.Errorf("Release of the lost lock = %v, want ErrLockLost", err)
				}
			default:
				waitDone(t, k)
				err := k.Err()
				if !errors.Is(err, dblock.ErrLockLost) || errors.Is(err, dblock.ErrReadOnly) || !endedByShutdown(err) {
					t.Fatalf("holder after the switchover: %v, want ErrLockLost caused by the old primary's shutdown (SQLSTATE 57P01)", err)
				}
				if fk, ok := k.(*forupdate.Lock); ok {
					if _, err := fk.Tx().ExecContext(ctx, `SELECT 1`); err == nil {
						t.Fatal("the lost holder's transaction still runs statements")
					}
				}
				if err := k.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
					t.Errorf("Release of the lost lock = %v, want ErrLockLost", err)
				}
			}
			takeTokens(t, ctx, s.l, k.Name(), tokensEach, s.last[k.Name()], s.opts, sc)
		})
	}
}

// TestSlowFailover: a failover slower than the lease. The primary stops,
// and the standby is promoted only once the rowlock holders have given
// up: a holder that cannot renew closes Done with ErrLockLost, wrapping
// why. Through a pool that asks for a writable server
// (target_session_attrs=read-write) that is the connection error; through
// one that takes any server it reaches the standby, and it is ErrReadOnly.
// Acquisitions meanwhile fail the same way, never as "not acquired". Once
// the standby is promoted, the lease the lost holder left runs out by the
// database clock and the same Locker takes the lock over, with a larger
// token. (A forupdate holder loses its lock at any switchover:
// TestSwitchover.)
func TestSlowFailover(t *testing.T) {
	if testdb.LeftOut(t, "postgres") {
		return
	}
	ctx := t.Context()
	r := testdb.NewReplicated(t)

	type side struct {
		kind
		attrs  string
		label  string
		db     *sql.DB
		l      dblock.Locker
		last   int64
		holder dblock.Lock
		sc     *staleConns
	}
	var sides []*side
	for _, kd := range kinds {
		if !kd.keepsLock {
			continue
		}
		for _, attrs := range []string{"read-write", "any"} {
			s := &side{kind: kd, attrs: attrs, label: kd.name + "/" + attrs, db: testdb.Open(t, r.Target, r.DSN(attrs))}
			s.l = kd.newLocker(t, s.db)
			name := testdb.Name(t)
			s.last = takeTokens(t, ctx, s.l, name, tokensEach, 0, kd.opts, nil)
			k, err := s.l.TryAcquire(ctx, name, append(kd.opts, dblock.TTL(lostTTL))...)
			if err != nil {
				t.Fatalf("%s: TryAcquire: %v", s.label, err)
			}
			t.Cleanup(func() { _ = k.Release(context.Background()) })
			s.holder, s.last = k, k.Token()
			sides = append(sides, s)
		}
	}

	r.StopPrimary(t)
	for _, s := range sides {
		s.sc = staleAfterStop(s.db)
	}
	// The pool on any server reaches the standby, which refuses writes;
	// the one on a writable server reaches none.
	wantCause := func(t *testing.T, s *side, what string, err error) {
		t.Helper()
		var connErr *pgconn.ConnectError
		switch {
		case s.attrs == "any" && !errors.Is(err, dblock.ErrReadOnly):
			t.Errorf("%s with the standby only = %v, want ErrReadOnly", what, err)
		case s.attrs == "read-write" && (errors.Is(err, dblock.ErrReadOnly) || !errors.As(err, &connErr)):
			t.Errorf("%s with no writable server = %v, want a connection error (*pgconn.ConnectError)", what, err)
		}
	}
	for _, s := range sides {
		t.Run("down/"+s.label, func(t *testing.T) {
			waitDone(t, s.holder)
			err := s.holder.Err()
			if !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("holder's Err = %v, want ErrLockLost", err)
			}
			wantCause(t, s, "the holder's loss", err)
			for _, name := range []string{s.holder.Name(), testdb.Name(t)} {
				var tryErr error
				s.sc.do(t, "TryAcquire", func() error {
					_, tryErr = s.l.TryAcquire(ctx, name, s.opts...)
					if endedByShutdown(tryErr) {
						return tryErr
					}
					return nil
				})
				if errors.Is(tryErr, dblock.ErrNotAcquired) {
					t.Errorf("TryAcquire = %v, want an error that says why, not ErrNotAcquired", tryErr)
				}
				wantCause(t, s, "TryAcquire", tryErr)
			}
		})
	}

	r.Promote(t)
	for _, s := range sides {
		t.Run("promoted/"+s.label, func(t *testing.T) {
			waitCtx, cancel := context.WithTimeout(ctx, bound)
			defer cancel()
			var k dblock.Lock
			s.sc.do(t, "Acquire", func() (err error) {
				k, err = s.l.Acquire(waitCtx, s.holder.Name(), s.opts...)
				return err
			})
			if k.Token() <= s.last {
				t.Fatalf("token %d on the new primary after token %d", k.Token(), s.last)
			}
			s.sc.do(t, "Release", func() error { return k.Release(ctx) })
			takeTokens(t, ctx, s.l, s.holder.Name(), tokensEach, k.Token(), s.opts, s.sc)
		})
	}
}
