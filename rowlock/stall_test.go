package rowlock_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestDoneOnTimeWhileRenewalStalls: the server holds a renewal up (here
// the proxy holds back its COMMIT on MySQL, its UPDATE on PostgreSQL, as a
// synchronous standby that went away or a Galera membership change does).
// Done must close by the hold's deadline, while the renewal is still
// stalled: database/sql's Tx.Commit takes no context, and a renewal waited
// for past the deadline kept Done open until the server answered, with
// the lease it failed to extend already lapsing.
func TestDoneOnTimeWhileRenewalStalls(t *testing.T) {
	stalled := map[dblock.Dialect]string{
		dblock.MySQL:    "COMMIT",              // the renewal's transaction (mysqlStore.renew)
		dblock.Postgres: "GREATEST(expires_at", // the renewal statement (pgRenew)
	}
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			proxy := testdb.NewProxy(t, tg.HostPort())
			db := testdb.Open(t, tg, plainDSNVia(t, tg, proxy.Addr()))
			l := newLocker(t, db, rowlock.WithCrashGrace(0))
			name := testdb.Name(t)
			k, err := l.TryAcquire(ctx, name, dblock.TTL(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			caught, resume := proxy.StallOn([]byte(stalled[tg.Dialect]))
			defer resume()
			select {
			case <-caught:
			case <-ctx.Done():
				t.Fatal("no renewal reached the proxy")
			}
			select {
			case <-k.Done():
			case <-ctx.Done():
				t.Fatal("Done stayed open while the renewal stalled past the hold's deadline")
			}
			if !errors.Is(k.Err(), dblock.ErrLockLost) {
				t.Fatalf("Err after Done = %v, want ErrLockLost", k.Err())
			}
			resume()
			if err := k.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Release of the lost hold = %v, want ErrLockLost", err)
			}
		})
	}
}

// TestLateTakeIsGivenBack: a take whose COMMIT the server holds up until
// the lease it wrote has lapsed (by the database clock) is not returned as
// held: someone else may hold the lock by then. MySQL only: there a fresh
// name's row is created in a transaction whose COMMIT the proxy can hold
// back after the row's lease was computed; PostgreSQL takes in single
// statements, whose commit cannot be held back apart from them.
func TestLateTakeIsGivenBack(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		if tg.Dialect != dblock.MySQL {
			continue
		}
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			proxy := testdb.NewProxy(t, tg.HostPort())
			db := testdb.Open(t, tg, tg.DSNVia(proxy.Addr()))
			l := newLocker(t, db, rowlock.WithCrashGrace(0))
			name := testdb.Name(t)
			caught, resume := proxy.StallOn([]byte("COMMIT"))
			defer resume()
			got := make(chan acquired, 1)
			go func() {
				k, err := l.TryAcquire(ctx, name, dblock.TTL(time.Second))
				got <- acquired{k, err}
			}()
			select {
			case <-caught:
			case <-ctx.Done():
				t.Fatal("the take's COMMIT never reached the proxy")
			}
			eventually(t, ctx, "the uncommitted row's lease to lapse", func() bool { return uncommittedLapsed(t, tg, name) })
			resume()
			r := <-got
			if r.err == nil {
				defer release(t, r.lock)
				t.Fatalf("a take answered after its lease lapsed was returned as held (Err %v)", r.lock.Err())
			}
			if !errors.Is(r.err, dblock.ErrNotAcquired) {
				t.Fatalf("late take = %v, want ErrNotAcquired", r.err)
			}
			k, err := newLocker(t, tg.DB).TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("the late take was not given back: %v", err)
			}
			release(t, k)
		})
	}
}

// plainDSNVia is tg's DSN through the proxy at addr, without TLS, so that
// the proxy can see the statements it is to stall.
func plainDSNVia(t testing.TB, tg testdb.Target, addr string) string {
	t.Helper()
	dsn := tg.DSNVia(addr)
	if tg.Dialect != dblock.Postgres {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("a PostgreSQL DSN in URL form is needed to turn TLS off: %v", err)
	}
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	return u.String()
}

// uncommittedLapsed reads, uncommitted, whether name's row has a lease
// that has lapsed by the database clock.
func uncommittedLapsed(t testing.TB, tg testdb.Target, name string) bool {
	t.Helper()
	tx, err := tg.DB.BeginTx(context.Background(), &sql.TxOptions{Isolation: sql.LevelReadUncommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var lapsed bool
	err = tx.QueryRow(`SELECT expires_at <= UTC_TIMESTAMP(6) FROM dblock_locks WHERE name = ?`, name).Scan(&lapsed)
	if errors.Is(err, sql.ErrNoRows) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return lapsed
}
