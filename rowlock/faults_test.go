package rowlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestChildHolder is the body of the child process of
// TestKilledHolderFreesLockWithinTTL; in a normal run it returns at once.
func TestChildHolder(t *testing.T) {
	if !testdb.IsChild() {
		return
	}
	name, dialect := os.Getenv("SQLLOCK_CHILD_LOCK"), os.Getenv("SQLLOCK_CHILD_DIALECT")
	ttl, _ := time.ParseDuration(os.Getenv("SQLLOCK_CHILD_TTL"))
	for _, tg := range testdb.Targets(t) {
		if tg.Name != dialect {
			continue
		}
		l, err := rowlock.New(tg.DB)
		if err != nil {
			t.Fatal(err)
		}
		k, err := l.Acquire(context.Background(), name, dblock.TTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("held %d\n", k.Token())
		// Hold (and renew) until killed.
		<-k.Done()
		t.Fatalf("child lost its lock: %v", k.Err())
	}
}

// TestKilledHolderFreesLockWithinTTL: a holder killed with SIGKILL keeps the
// lock for at most one TTL after its death, by the database clock: its
// lease ends no later than the kill plus one TTL, and once the database
// clock passes it a TryAcquire takes the lock at once.
func TestKilledHolderFreesLockWithinTTL(t *testing.T) {
	const ttl = 2 * time.Second
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			name := testdb.Name(t)
			child := testdb.Child(t, "TestChildHolder",
				"SQLLOCK_CHILD_LOCK="+name, "SQLLOCK_CHILD_DIALECT="+tg.Name, "SQLLOCK_CHILD_TTL="+ttl.String())
			waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			line, err := child.WaitLine(waitCtx, "held ")
			if err != nil {
				t.Fatalf("child did not report holding the lock: %v", err)
			}
			childToken, _ := strconv.ParseInt(strings.TrimPrefix(line, "held "), 10, 64)
			// Kill it once it has renewed, so that the bound below covers
			// renewals, not only the lease that acquiring set.
			for first := expiresAtMicros(t, tg, name); expiresAtMicros(t, tg, name) == first; {
				if waitCtx.Err() != nil {
					t.Fatal("the child never renewed its lease")
				}
				sleepBriefly()
			}
			child.Kill()
			// Read after the child was reaped: its last renewal ran before
			// this by the database clock (a statement it had sent may
			// still have been running, for a moment, when it died).
			killedAt := dbNowMicros(t, tg)
			expiresAt := expiresAtMicros(t, tg, name)
			if limit := killedAt + ttl.Microseconds(); expiresAt > limit {
				t.Fatalf("dead holder's lease runs %v past its death plus the TTL",
					time.Duration(expiresAt-limit)*time.Microsecond)
			}

			l := newLocker(t, tg.DB)
			// The row outlives the process: only the lease frees it.
			k, err := l.TryAcquire(ctx, name)
			switch {
			case errors.Is(err, dblock.ErrNotAcquired):
				waitExpired(t, tg, name)
				// Free now by the database clock: taken at once.
				if k, err = l.TryAcquire(ctx, name); err != nil {
					t.Fatalf("TryAcquire once the dead holder's lease lapsed: %v", err)
				}
			case err != nil:
				t.Fatal(err)
			case acquiredAtMicros(t, tg, name) < expiresAt:
				// Only a slow machine gets here, taking the lock after the
				// lease lapsed; taking it before would be a bug.
				t.Fatalf("lock taken %v before the dead holder's lease lapsed",
					time.Duration(expiresAt-acquiredAtMicros(t, tg, name))*time.Microsecond)
			}
			if k.Token() <= childToken {
				t.Fatalf("token %d not above the dead holder's %d", k.Token(), childToken)
			}
			release(t, k)
		})
	}
}

// TestCutConnectionLosesLockBeforeOthersGetIt cuts a holder's database
// connections: it must give the lock up (Done) before anyone else can take
// it, by the order of events, not by a timing threshold.
func TestCutConnectionLosesLockBeforeOthersGetIt(t *testing.T) {
	const ttl = time.Second
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			proxy := testdb.NewProxy(t, tg.HostPort())
			cutDB := testdb.Open(t, tg, tg.DSNVia(proxy.Addr()))
			holder := newLocker(t, cutDB)
			other := newLocker(t, tg.DB)
			name := testdb.Name(t)

			k, err := holder.Acquire(ctx, name, dblock.TTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			proxy.Cut()

			type event struct {
				what string
				at   time.Time
			}
			events := make(chan event, 2)
			go func() {
				<-k.Done()
				events <- event{"holder lost", time.Now()}
			}()
			acqCtx, cancel := context.WithTimeout(ctx, 20*ttl)
			defer cancel()
			k2, err := other.Acquire(acqCtx, name)
			if err != nil {
				t.Fatalf("Acquire after the holder was cut off: %v", err)
			}
			acquiredAt := time.Now()
			var lost event
			select {
			case lost = <-events:
			case <-time.After(10 * ttl):
				t.Fatal("cut-off holder never closed Done")
			}
			if !lost.at.Before(acquiredAt) {
				t.Fatalf("new holder got the lock %v before the cut-off holder gave it up", lost.at.Sub(acquiredAt))
			}
			if !errors.Is(k.Err(), dblock.ErrLockLost) {
				t.Fatalf("cut-off holder Err = %v, want ErrLockLost", k.Err())
			}
			proxy.Restore()
			if err := k.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Release by the cut-off holder = %v, want ErrLockLost", err)
			}
			if row := readRow(t, tg, name); row.token != k2.Token() {
				t.Fatalf("new holder's row changed by the old holder: %+v", row)
			}
			release(t, k2)
		})
	}
}

// TestFencedWrite: CheckHeld inside the holder's transaction fails once the
// lock is lost, and while the transaction is open nobody can take the lock
// over, even after its lease lapsed.
func TestFencedWrite(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			a, b := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)
			k, err := a.TryAcquire(ctx, name, dblock.TTL(300*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			fencer := k.(dblock.Fencer)
			tx, err := tg.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := fencer.CheckHeld(ctx, tx); err != nil {
				t.Fatalf("CheckHeld while held: %v", err)
			}
			// The open transaction blocks renewals too, so the holder
			// declares the lock lost; the lease lapses in the database.
			waitDone(t, k, 10*time.Second)
			waitExpired(t, tg, name)

			taken := make(chan error, 1)
			var taker dblock.Lock
			go func() {
				var err error
				// Acquire: TryAcquire would not wait for the row lock,
				// and say ErrNotAcquired (TestNoTakeoverUnderAnOpenFence).
				taker, err = b.Acquire(ctx, name)
				taken <- err
			}()
			waitBlockedOnRowLock(t, tg)
			select {
			case err := <-taken:
				t.Fatalf("lock taken over while the fenced transaction was open: %v", err)
			default:
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := <-taken; err != nil {
				t.Fatalf("takeover after the fenced transaction ended: %v", err)
			}
			tx2, err := tg.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = fencer.CheckHeld(ctx, tx2)
			// Roll back at once: on MySQL the failed check still holds a
			// shared lock on the new holder's row.
			_ = tx2.Rollback()
			if !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("CheckHeld after takeover = %v, want ErrLockLost", err)
			}
			_ = k.Release(ctx)
			release(t, taker)
		})
	}
}

// waitExpired polls (bounded) until the database clock says name's lease has
// lapsed.
func waitExpired(t testing.TB, tg testdb.Target, name string) {
	t.Helper()
	q := `SELECT count(*) FROM dblock_locks WHERE name = $1 AND expires_at <= clock_timestamp()`
	if tg.Dialect == dblock.MySQL {
		q = `SELECT count(*) FROM dblock_locks WHERE name = ? AND expires_at <= UTC_TIMESTAMP(6)`
	}
	for range 500 {
		var n int
		if err := tg.DB.QueryRowContext(context.Background(), q, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("lease of %q never lapsed", name)
}

// waitBlockedOnRowLock polls (bounded) until some session waits for a row
// lock: the contender is queued behind the fenced transaction.
func waitBlockedOnRowLock(t testing.TB, tg testdb.Target) {
	t.Helper()
	q := `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%dblock_locks%'`
	if tg.Dialect == dblock.MySQL {
		q = `SELECT count(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'`
	}
	for range 500 {
		var n int
		if err := tg.DB.QueryRowContext(context.Background(), q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("contender never blocked on the fenced row")
}

func TestDoCancelsWhenLockLost(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			a, b := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)
			var taker dblock.Lock
			err := dblock.Do(ctx, a, name, func(ctx context.Context) error {
				expireNow(t, tg, name)
				var err error
				if taker, err = b.TryAcquire(context.Background(), name); err != nil {
					return err
				}
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case <-time.After(20 * time.Second):
					return errors.New("fn's context was not canceled after the lock was lost")
				}
			}, dblock.TTL(300*time.Millisecond))
			if !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Do = %v, want ErrLockLost", err)
			}
			release(t, taker)

			ran := false
			if err := dblock.Do(ctx, a, name, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
				t.Fatalf("Do on a free lock: ran %v, err %v", ran, err)
			}
			if row := readRow(t, tg, name); row.holdCount != 0 {
				t.Fatalf("Do left the lock held: %+v", row)
			}
		})
	}
}
