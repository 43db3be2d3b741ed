package forupdate_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestBlockingHandoff: a second Locker's Acquire waits in the database
// while the first holds, and gets the lock, with the next token, when it is
// released.
func TestBlockingHandoff(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			first := newLocker(t, tg.DB)
			waiterDB := singleConnDB(t, tg)
			waiterSession := sessionID(t, tg, waiterDB)
			second := newLocker(t, waiterDB)

			k1 := acquire(t, ctx, first, name)
			got := acquireAsync(ctx, second, name)
			waitForState(t, tg, waiterSession, "waiting")
			select {
			case r := <-got:
				t.Fatalf("second Acquire returned while the first holds: %v", r.err)
			default:
			}
			release(t, k1)
			r := await(t, got)
			if r.err != nil {
				t.Fatalf("second Acquire: %v", r.err)
			}
			if r.lock.Token() <= k1.Token() {
				t.Fatalf("token %d after %d, want a larger one", r.lock.Token(), k1.Token())
			}
			if !errors.Is(k1.Err(), dblock.ErrReleased) {
				t.Fatalf("first lock's Err = %v, want ErrReleased", k1.Err())
			}
			release(t, r.lock)
		})
	}
}

func TestTryAcquireNowait(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			l := newLocker(t, tg.DB)
			other := newLocker(t, tg.DB)

			// First use of the name: the row is created on the way.
			k, err := l.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire of a new name: %v", err)
			}
			if _, err := other.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("TryAcquire while held = %v, want ErrNotAcquired", err)
			}
			// The same Locker, another owner: also refused.
			if _, err := l.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("TryAcquire by another owner = %v, want ErrNotAcquired", err)
			}
			release(t, k)
			k2, err := other.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire after release: %v", err)
			}
			if k2.Token() <= k.Token() {
				t.Fatalf("token %d after %d", k2.Token(), k.Token())
			}
			release(t, k2)
		})
	}
}

// TestCancelWhileWaiting: ending the context of a waiting Acquire stops
// the wait on the server, and leaves the connection open, idle and out of
// any transaction.
func TestCancelWhileWaiting(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			name := testdb.Name(t)
			holder := newLocker(t, tg.DB)
			k := acquire(t, t.Context(), holder, name)
			defer release(t, k)

			for _, how := range []string{"cancel", "deadline"} {
				waiterDB := twoConnDB(t, tg)
				session := sessionID(t, tg, waiterDB)
				waiter := newLocker(t, waiterDB)
				ctx, cancel := context.WithCancel(t.Context())
				if how == "deadline" {
					// Far enough for the wait to have begun: the wait is
					// what is being stopped.
					ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
				}
				got := acquireAsync(ctx, waiter, name)
				if how == "cancel" {
					waitForState(t, tg, session, "waiting")
					cancel()
				}
				r := await(t, got)
				cancel()
				want := context.Canceled
				if how == "deadline" {
					want = context.DeadlineExceeded
				}
				if !errors.Is(r.err, dblock.ErrNotAcquired) || !errors.Is(r.err, want) {
					t.Fatalf("%s: Acquire = %v, want ErrNotAcquired and %v", how, r.err, want)
				}
				// The session was not cut: it is idle, out of any
				// transaction, no longer waiting.
				waitForState(t, tg, session, "idle")
			}
		})
	}
}

// TestTxCommitsWithRelease: work done in Tx becomes visible when, and only
// when, the lock is released; Rollback discards it and releases too.
func TestTxCommitsWithRelease(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			table := workTable(t, tg)
			name := testdb.Name(t)
			l := newLocker(t, tg.DB)
			count := func() int {
				var n int
				if err := tg.DB.QueryRowContext(ctx, tg.Q(`SELECT COUNT(*) FROM `+table+` WHERE name = $1`), name).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}

			k := acquire(t, ctx, l, name)
			if _, err := k.Tx().ExecContext(ctx, tg.Q(`INSERT INTO `+table+` (name, n) VALUES ($1, $2)`), name, k.Token()); err != nil {
				t.Fatal(err)
			}
			if n := count(); n != 0 {
				t.Fatalf("work visible before release (%d rows)", n)
			}
			release(t, k)
			if n := count(); n != 1 {
				t.Fatalf("work not visible after release (%d rows)", n)
			}

			k = acquire(t, ctx, l, name)
			if _, err := k.Tx().ExecContext(ctx, tg.Q(`DELETE FROM `+table+` WHERE name = $1`), name); err != nil {
				t.Fatal(err)
			}
			if err := k.Rollback(ctx); err != nil {
				t.Fatalf("Rollback: %v", err)
			}
			if n := count(); n != 1 {
				t.Fatalf("rolled-back work visible (%d rows)", n)
			}
			// Rollback released the lock; its token is never handed out
			// again, though its transaction did not commit.
			k2, err := l.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire after Rollback: %v", err)
			}
			if k2.Token() <= k.Token() {
				t.Fatalf("token after a rolled-back hold = %d, want more than its %d", k2.Token(), k.Token())
			}
			release(t, k2)
		})
	}
}

// TestNoOverlap: many goroutines over two Lockers (two pools) take turns;
// no two are ever inside at once, a read-modify-write through Tx loses no
// update, and tokens grow in the order holders got the lock.
func TestNoOverlap(t *testing.T) {
	const goroutines, rounds = 8, 5
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			table := workTable(t, tg)
			name := testdb.Name(t)
			if _, err := tg.DB.ExecContext(ctx, tg.Q(`INSERT INTO `+table+` (name, n) VALUES ($1, 0)`), name); err != nil {
				t.Fatal(err)
			}
			otherDB := testdb.Open(t, tg, tg.DSN)
			lockers := []*forupdate.Locker{newLocker(t, tg.DB), newLocker(t, otherDB)}

			var inside atomic.Int32
			var mu sync.Mutex
			var tokens []int64
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := lockers[g%len(lockers)]
					for range rounds {
						k, err := l.Acquire(ctx, name)
						if err != nil {
							errs <- err
							return
						}
						if n := inside.Add(1); n != 1 {
							errs <- fmt.Errorf("%d holders inside at once", n)
						}
						mu.Lock()
						tokens = append(tokens, k.Token())
						mu.Unlock()
						tx := k.(*forupdate.Lock).Tx()
						var n int64
						err = tx.QueryRowContext(ctx, tg.Q(`SELECT n FROM `+table+` WHERE name = $1`), name).Scan(&n)
						if err == nil {
							_, err = tx.ExecContext(ctx, tg.Q(`UPDATE `+table+` SET n = $1 WHERE name = $2`), n+1, name)
						}
						inside.Add(-1)
						err = errors.Join(err, k.Release(ctx))
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			var n int64
			if err := tg.DB.QueryRowContext(ctx, tg.Q(`SELECT n FROM `+table+` WHERE name = $1`), name).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != goroutines*rounds {
				t.Fatalf("counter = %d, want %d: updates were lost", n, goroutines*rounds)
			}
			for i := 1; i < len(tokens); i++ {
				if tokens[i] <= tokens[i-1] {
					t.Fatalf("tokens in acquisition order %v: not increasing at %d", tokens, i)
				}
			}
		})
	}
}

// TestReentrancy: the same owner re-enters without a second transaction;
// the lock is freed by the last release.
func TestReentrancy(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			// One connection: a second transaction would have to wait for it.
			db := singleConnDB(t, tg)
			l := newLocker(t, db, forupdate.WithConnTimeout(100*time.Millisecond))
			other := newLocker(t, tg.DB)

			outer := acquire(t, ctx, l, name)
			inner := acquire(t, outer.Context(), l, name)
			if inner.Token() != outer.Token() || inner.Tx() != outer.Tx() {
				t.Fatal("re-entry got another token or transaction")
			}
			try, err := l.TryAcquire(dblock.WithOwner(ctx, outer.Owner().ID), name)
			if err != nil {
				t.Fatalf("TryAcquire by the owner: %v", err)
			}
			release(t, try)
			release(t, inner)
			if !errors.Is(inner.Err(), dblock.ErrReleased) || outer.Err() != nil {
				t.Fatalf("after the inner release: inner %v, outer %v", inner.Err(), outer.Err())
			}
			if err := inner.Release(ctx); !errors.Is(err, dblock.ErrNotHeld) {
				t.Fatalf("second Release = %v, want ErrNotHeld", err)
			}
			if _, err := other.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("TryAcquire by another owner while the outer hold remains = %v", err)
			}

			// Concurrent first acquisitions by one owner: one transaction.
			owned := dblock.WithOwner(ctx, "reentrancy-test-owner")
			release(t, outer)
			var wg sync.WaitGroup
			locks := make([]*forupdate.Lock, 4)
			for i := range locks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					k, err := l.Acquire(owned, name)
					if err != nil {
						t.Error(err)
						return
					}
					locks[i] = k.(*forupdate.Lock)
				}()
			}
			wg.Wait()
			for _, k := range locks[1:] {
				if k == nil || locks[0] == nil || k.Tx() != locks[0].Tx() {
					t.Fatal("one owner's concurrent acquisitions did not share one transaction")
				}
			}

			// An inner Rollback makes the outer Release roll back.
			if err := locks[0].Rollback(ctx); err != nil {
				t.Fatalf("inner Rollback: %v", err)
			}
			for _, k := range locks[1:3] {
				release(t, k)
			}
			if err := locks[3].Release(ctx); !errors.Is(err, forupdate.ErrRolledBack) {
				t.Fatalf("outer Release after an inner Rollback = %v, want ErrRolledBack", err)
			}
			k, err := other.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire after all holds ended: %v", err)
			}
			release(t, k)
		})
	}
}

// TestTxMisuse: a transaction ended behind the lock's back is reported as a
// lost lock; so is, on PostgreSQL, a failed statement, which aborts the
// transaction at once (unless it ran in a savepoint).
func TestTxMisuse(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			l := newLocker(t, tg.DB)
			other := newLocker(t, tg.DB)

			k := acquire(t, ctx, l, name)
			if err := k.Tx().Commit(); err != nil {
				t.Fatal(err)
			}
			if err := k.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Release after Tx().Commit() = %v, want ErrLockLost", err)
			}

			// A failed statement inside a savepoint keeps the lock.
			k = acquire(t, ctx, l, name)
			tx := k.Tx()
			if _, err := tx.ExecContext(ctx, `SAVEPOINT risky`); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, `SELECT * FROM forupdate_no_such_table`); err == nil {
				t.Fatal("query on a missing table succeeded")
			}
			// On PostgreSQL the savepoint is aborted now, not the lock.
			if err := k.Refresh(ctx); err != nil {
				t.Fatalf("Refresh after a statement failed in a savepoint: %v", err)
			}
			if _, err := tx.ExecContext(ctx, `ROLLBACK TO SAVEPOINT risky`); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, `RELEASE SAVEPOINT risky`); err != nil {
				t.Fatal(err)
			}
			if _, err := other.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("TryAcquire after a statement failed in a savepoint = %v, want ErrNotAcquired", err)
			}

			// Without one, PostgreSQL releases the lock with the failure.
			if _, err := tx.ExecContext(ctx, `SELECT * FROM forupdate_no_such_table`); err == nil {
				t.Fatal("query on a missing table succeeded")
			}
			if tg.Dialect == dblock.MySQL {
				if err := k.Refresh(ctx); err != nil {
					t.Fatalf("Refresh after a failed statement: %v", err)
				}
				if _, err := other.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
					t.Fatalf("TryAcquire after a failed statement = %v, want ErrNotAcquired (MySQL keeps the transaction)", err)
				}
				release(t, k)
				return
			}
			if err := k.Refresh(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Refresh after a failed statement = %v, want ErrLockLost", err)
			}
			select {
			case <-k.Done():
			default:
				t.Fatal("Done not closed")
			}
			k2, err := other.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire after the holder's transaction aborted: %v", err)
			}
			if err := k.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Release after a failed statement = %v, want ErrLockLost", err)
			}
			release(t, k2)
		})
	}
}

// TestSessionRestored: the pool gets its connection back as it lent it,
// and the user's statements in Tx run with the session's own settings,
// after an Acquire that waited too (MySQL bounds its waiting statements
// with the session's innodb_lock_wait_timeout).
func TestSessionRestored(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := singleConnDB(t, tg)
			settings := `SELECT current_setting('idle_in_transaction_session_timeout') || '/' || current_setting('lock_timeout')`
			lockWait := `SELECT current_setting('lock_timeout')`
			if tg.Dialect == dblock.MySQL {
				settings = `SELECT CONCAT_WS('/', @@SESSION.wait_timeout, @@SESSION.innodb_lock_wait_timeout,
					COALESCE(@sqllock_wait_timeout, 'unset'), COALESCE(@sqllock_lock_wait_timeout, 'unset'))`
				lockWait = `SELECT CONCAT(@@SESSION.innodb_lock_wait_timeout)`
			}
			read := func(q interface {
				QueryRowContext(context.Context, string, ...any) *sql.Row
			}, query string) string {
				var s string
				if err := q.QueryRowContext(ctx, query).Scan(&s); err != nil {
					t.Fatal(err)
				}
				return s
			}
			before, session := read(db, settings), sessionID(t, tg, db)
			beforeLockWait := read(db, lockWait)
			l := newLocker(t, db)
			name := testdb.Name(t)
			k := acquire(t, ctx, l, name, dblock.TTL(7*time.Second))
			if err := k.Refresh(ctx); err != nil {
				t.Fatalf("Refresh: %v", err)
			}
			release(t, k)
			if err := k.Refresh(ctx); !errors.Is(err, dblock.ErrNotHeld) {
				t.Fatalf("Refresh after Release = %v, want ErrNotHeld", err)
			}
			if after := read(db, settings); after != before {
				t.Fatalf("session settings %q after the lock, %q before", after, before)
			}

			// An Acquire that waited.
			holder := acquire(t, ctx, newLocker(t, tg.DB), name)
			got := acquireAsync(ctx, l, name)
			waitForState(t, tg, session, "waiting")
			release(t, holder)
			r := await(t, got)
			if r.err != nil {
				t.Fatalf("Acquire after the holder released: %v", r.err)
			}
			if inTx := read(r.lock.Tx(), lockWait); inTx != beforeLockWait {
				t.Errorf("lock wait timeout in Tx after a waiting Acquire: %q, the session's own is %q", inTx, beforeLockWait)
			}
			release(t, r.lock)
			if after := read(db, settings); after != before {
				t.Fatalf("session settings %q after a waiting Acquire, %q before", after, before)
			}
			if id := sessionID(t, tg, db); id != session {
				t.Fatalf("connection replaced (%d, was %d)", id, session)
			}
		})
	}
}

// TestCancelWithoutASpareConnection: on a pool of one connection, ending
// the context of a waiting Acquire leaves nothing waiting on the server.
// MySQL's KILL QUERY needs a second connection, which the pool cannot
// give: the connection used to be cut, and the server kept the statement
// waiting for the row lock until innodb_lock_wait_timeout, to take it for
// nobody. Now the waiting statement is bounded and ends by itself, and the
// connection returns to the pool clean. (PostgreSQL's cancel request needs
// no pool connection.)
func TestCancelWithoutASpareConnection(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			name := testdb.Name(t)
			holder := acquire(t, t.Context(), newLocker(t, tg.DB), name)
			waiterDB := singleConnDB(t, tg)
			session := sessionID(t, tg, waiterDB)
			waiter := newLocker(t, waiterDB)

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			got := acquireAsync(ctx, waiter, name)
			waitForState(t, tg, session, "waiting")
			cancel()
			r := await(t, got)
			if !errors.Is(r.err, dblock.ErrNotAcquired) || !errors.Is(r.err, context.Canceled) {
				t.Fatalf("Acquire = %v, want ErrNotAcquired and context.Canceled", r.err)
			}
			// The session was not left waiting (nor cut): it is idle, out
			// of any transaction, and it is the pool's connection still.
			waitForState(t, tg, session, "idle")
			if id := sessionID(t, tg, waiterDB); id != session {
				t.Fatalf("connection replaced (%d, was %d)", id, session)
			}
			// Nobody is queued behind the holder: once it releases, the
			// lock is free at once.
			release(t, holder)
			k, err := waiter.TryAcquire(t.Context(), name)
			if err != nil {
				t.Fatalf("TryAcquire after the holder released: %v", err)
			}
			release(t, k)
		})
	}
}

// TestPoolExhausted: with every connection held, Acquire fails with
// ErrNoConnection instead of waiting forever.
func TestPoolExhausted(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := singleConnDB(t, tg)
			// Open the pool's one connection first: the short timeout below
			// is for waiting on a busy pool, and dialing a fresh connection
			// can take longer than that on a loaded machine.
			if err := db.PingContext(ctx); err != nil {
				t.Fatal(err)
			}
			l := newLocker(t, db, forupdate.WithConnTimeout(50*time.Millisecond))
			k := acquire(t, ctx, l, testdb.Name(t))
			_, err := l.Acquire(ctx, testdb.Name(t)+"-other")
			if !errors.Is(err, forupdate.ErrNoConnection) {
				t.Fatalf("Acquire with the pool exhausted = %v, want ErrNoConnection", err)
			}
			release(t, k)
			// The connection is back: a Locker with the default timeout
			// gets it.
			release(t, acquire(t, ctx, newLocker(t, db), testdb.Name(t)+"-other"))
		})
	}
}

func TestTokensGrowAcrossLockers(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			lockers := []*forupdate.Locker{newLocker(t, tg.DB), newLocker(t, testdb.Open(t, tg, tg.DSN))}
			var last int64
			for i := range 6 {
				k := acquire(t, ctx, lockers[i%2], name)
				if k.Token() <= last {
					t.Fatalf("token %d after %d", k.Token(), last)
				}
				last = k.Token()
				release(t, k)
			}
		})
	}
}
