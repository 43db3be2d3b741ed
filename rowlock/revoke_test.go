package rowlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestRevoke: Revoke ends a live hold by the database clock; its holder
// learns it at its next Refresh, another owner takes the lock with a
// larger token, and nothing is left of the old hold. A free name and a
// lapsed one report false; a lock kept by MinHold is freed; bad input is
// refused.
func TestRevoke(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			a, b := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)
			for _, c := range []struct {
				what string
				take func(t *testing.T) dblock.Lock
			}{
				{"held", func(t *testing.T) dblock.Lock { return tryHold(t, a, ctx, name, dblock.TTL(time.Hour)) }},
				{"re-entered", func(t *testing.T) dblock.Lock {
					outer := tryHold(t, a, ctx, name, dblock.TTL(time.Hour))
					return tryHold(t, a, outer.Context(), name)
				}},
			} {
				k := c.take(t)
				revoked, err := b.Revoke(ctx, name)
				if err != nil || !revoked {
					t.Fatalf("%s: Revoke = %v, %v; want true, nil", c.what, revoked, err)
				}
				if err := k.Refresh(ctx); !errors.Is(err, dblock.ErrLockLost) {
					t.Fatalf("%s: Refresh after Revoke = %v, want dblock.ErrLockLost", c.what, err)
				}
				waitDone(t, k, time.Minute)
				next, err := b.TryAcquire(ctx, name)
				if err != nil {
					t.Fatalf("%s: TryAcquire after Revoke = %v", c.what, err)
				}
				if next.Token() <= k.Token() {
					t.Errorf("%s: token after Revoke %d, want more than %d", c.what, next.Token(), k.Token())
				}
				if err := k.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
					t.Errorf("%s: Release of the revoked hold = %v, want dblock.ErrLockLost", c.what, err)
				}
				if err := next.Err(); err != nil {
					t.Fatalf("%s: the next holder after the revoked one's Release: %v", c.what, err)
				}
				release(t, next)
			}

			if revoked, err := a.Revoke(ctx, name); err != nil || revoked {
				t.Errorf("Revoke of a released lock = %v, %v; want false, nil", revoked, err)
			}
			if revoked, err := a.Revoke(ctx, testdb.Name(t)+"-never-taken"); err != nil || revoked {
				t.Errorf("Revoke of a name never taken = %v, %v; want false, nil", revoked, err)
			}

			kept := tryHold(t, a, ctx, name, dblock.MinHold(time.Hour))
			release(t, kept)
			if _, err := b.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("TryAcquire of a lock kept by MinHold = %v, want dblock.ErrNotAcquired", err)
			}
			if revoked, err := a.Revoke(ctx, name); err != nil || !revoked {
				t.Fatalf("Revoke of a lock kept by MinHold = %v, %v; want true, nil", revoked, err)
			}
			release(t, tryHold(t, b, ctx, name))
		})
	}
}

// TestRevokeWaitsForFencedTransaction: a transaction that proved the hold
// with CheckHeld keeps Revoke waiting until it ends, so what it writes is
// committed before the lease ends. Revoke is seen waiting for the
// transaction's row lock by the server's own lock views.
func TestRevokeWaitsForFencedTransaction(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			holder, operator := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)
			k := tryHold(t, holder, ctx, name)
			self := `SELECT pg_backend_pid()`
			blocked := `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`
			poll := 5 * time.Millisecond
			if tg.Dialect == dblock.MySQL {
				// InnoDB refreshes these views at most every 0.1 s.
				poll = 150 * time.Millisecond
				self = `SELECT CONNECTION_ID()`
				blocked = `SELECT count(*) FROM information_schema.INNODB_LOCK_WAITS w
JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id WHERE b.trx_mysql_thread_id = ?`
			}
			tx, err := tg.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			var session int64
			if err := tx.QueryRowContext(ctx, self).Scan(&session); err != nil {
				t.Fatal(err)
			}
			if err := k.(dblock.Fencer).CheckHeld(ctx, tx); err != nil {
				t.Fatal(err)
			}
			type result struct {
				revoked bool
				err     error
			}
			revoked := make(chan result, 1)
			go func() {
				ok, err := operator.Revoke(ctx, name)
				revoked <- result{ok, err}
			}()
			for {
				select {
				case r := <-revoked:
					t.Fatalf("Revoke returned (%v, %v) while a fenced transaction held the row", r.revoked, r.err)
				default:
				}
				var n int
				if err := tg.DB.QueryRowContext(ctx, blocked, session).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					break
				}
				if ctx.Err() != nil {
					t.Fatal("Revoke never waited for the fenced transaction")
				}
				time.Sleep(poll)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if r := <-revoked; r.err != nil || !r.revoked {
				t.Fatalf("Revoke after the fenced transaction = %v, %v; want true, nil", r.revoked, r.err)
			}
			if err := k.Refresh(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Refresh after Revoke = %v, want dblock.ErrLockLost", err)
			}
		})
	}
}

// TestRevokeBadInput: bad input is refused with a typed error, a closed
// Locker with dblock.ErrClosed.
func TestRevokeBadInput(t *testing.T) {
	tg := testdb.AllTargets(t)[0]
	l := newLocker(t, tg.DB)
	for _, c := range []struct {
		ctx  context.Context
		name string
		want error
	}{
		{t.Context(), "", dblock.ErrInvalidName},
		{t.Context(), "bad\xff", dblock.ErrInvalidName},
		{nil, "jobs/x", dblock.ErrInvalidOption},
	} {
		if _, err := l.Revoke(c.ctx, c.name); !errors.Is(err, c.want) {
			t.Errorf("Revoke(%q) = %v, want %v", c.name, err, c.want)
		}
	}
	closed := newLocker(t, tg.DB)
	_ = closed.Close()
	if _, err := closed.Revoke(t.Context(), "jobs/x"); !errors.Is(err, dblock.ErrClosed) {
		t.Errorf("Revoke on a closed Locker = %v, want dblock.ErrClosed", err)
	}
}

// tryHold takes name with TryAcquire, failing the test if it cannot, and
// releases it when the test ends.
func tryHold(t *testing.T, l *rowlock.Locker, ctx context.Context, name string, opts ...dblock.Option) dblock.Lock {
	t.Helper()
	k, err := l.TryAcquire(ctx, name, opts...)
	if err != nil {
		t.Fatalf("TryAcquire(%q) = %v", name, err)
	}
	t.Cleanup(func() { _ = k.Release(context.Background()) })
	return k
}

// An operator frees a lock whose holder is alive but stuck: its renewal
// goes on, its work does not. The holder's next renewal finds the lease
// ended; the next holder's fencing token is larger, so the stuck holder's
// fenced writes are refused.
func ExampleLocker_Revoke() {
	ctx := context.Background()
	db := testdb.ExampleDB()
	defer db.Close()
	locker, err := rowlock.New(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	name := fmt.Sprintf("example/revoke/%d", time.Now().UnixNano())
	stuck, err := locker.TryAcquire(ctx, name)
	if err != nil {
		panic(err)
	}

	revoked, err := locker.Revoke(ctx, name) // the operator, from another process
	if err != nil {
		panic(err)
	}
	fmt.Println("revoked:", revoked)
	fmt.Println("holder's next renewal:", errors.Is(stuck.Refresh(ctx), dblock.ErrLockLost))

	next, err := locker.TryAcquire(ctx, name)
	if err != nil {
		panic(err)
	}
	defer next.Release(ctx)
	fmt.Println("next token is larger:", next.Token() > stuck.Token())
	// Output:
	// revoked: true
	// holder's next renewal: true
	// next token is larger: true
}
