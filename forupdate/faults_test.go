package forupdate_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/testdb"
)

// childTTL is the TTL of the child's lock: so long that only the death of
// its process can free the lock while the test runs.
const childTTL = time.Hour

// TestChildHolder is the body of the child process of
// TestKilledHolderFreesLockAtOnce; in a normal run it returns at once. It
// reports its token, its session, and the shortest server timeout that
// could end its session while it holds the lock (0: none).
func TestChildHolder(t *testing.T) {
	if !testdb.IsChild() {
		return
	}
	name, dialect := os.Getenv("SQLLOCK_CHILD_LOCK"), os.Getenv("SQLLOCK_CHILD_DIALECT")
	for _, tg := range targets(t) {
		if tg.Name != dialect {
			continue
		}
		k := acquire(t, context.Background(), newLocker(t, tg.DB), name, dblock.TTL(childTTL))
		session, timeout := holderSession(t, tg, k.Tx())
		fmt.Printf("held %d %d %d\n", k.Token(), session, timeout.Milliseconds())
		<-k.Done()
		t.Fatalf("child lost its lock: %v", k.Err())
	}
}

// holderSession returns, from inside a lock's transaction, its session's
// id and the shortest timeout after which the server would end that
// session while it idles in its transaction, counted at the latest from
// the transaction's start: PostgreSQL's idle_in_transaction_session_timeout
// and transaction_timeout (17+); MySQL's wait_timeout and MariaDB's
// idle_*transaction_timeout. 0 when none is set. (Timeouts of running
// statements, or of sessions outside a transaction, cannot apply.)
func holderSession(t testing.TB, tg testdb.Target, tx *sql.Tx) (session int64, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	if tg.Dialect == dblock.Postgres {
		var ms int64
		err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid(), COALESCE(min(setting::bigint), 0) FROM pg_settings
			WHERE name IN ('idle_in_transaction_session_timeout', 'transaction_timeout') AND setting <> '0'`).Scan(&session, &ms)
		if err != nil {
			t.Fatalf("holder session: %v", err)
		}
		return session, time.Duration(ms) * time.Millisecond
	}
	if err := tx.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&session); err != nil {
		t.Fatalf("holder session: %v", err)
	}
	// Variables the server does not have are left out, not an error.
	rows, err := tx.QueryContext(ctx, `SHOW SESSION VARIABLES WHERE Variable_name IN
		('wait_timeout', 'idle_transaction_timeout', 'idle_write_transaction_timeout', 'idle_readonly_transaction_timeout')`)
	if err != nil {
		t.Fatalf("holder timeouts: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var variable string
		var seconds int64
		if err := rows.Scan(&variable, &seconds); err != nil {
			t.Fatalf("holder timeouts: %v", err)
		}
		if d := time.Duration(seconds) * time.Second; d > 0 && (timeout == 0 || d < timeout) {
			timeout = d
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("holder timeouts: %v", err)
	}
	return session, timeout
}

// dbMicros are microseconds since the Unix epoch by the database clock.
type dbMicros int64

func (m dbMicros) String() string { return time.UnixMicro(int64(m)).UTC().Format(time.RFC3339Nano) }

// dbNow reads the database clock.
func dbNow(t testing.TB, tg testdb.Target) dbMicros {
	t.Helper()
	q := `SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`
	if tg.Dialect == dblock.MySQL {
		q = `SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6))`
	}
	var now dbMicros
	if err := tg.DB.QueryRowContext(context.Background(), q).Scan(&now); err != nil {
		t.Fatalf("database clock: %v", err)
	}
	return now
}

// txStart is when session's transaction began, by the database clock, or
// a moment before (MySQL shows it to the second); it fails the test when
// the session has no transaction.
func txStart(t testing.TB, tg testdb.Target, session int64) dbMicros {
	t.Helper()
	q := `SELECT (extract(epoch FROM xact_start) * 1000000)::bigint FROM pg_stat_activity WHERE pid = $1 AND xact_start IS NOT NULL`
	if tg.Dialect == dblock.MySQL {
		// trx_started is in the session's time zone, as NOW() is: their
		// difference is the transaction's age, whatever the zone.
		q = `SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) - TIMESTAMPDIFF(MICROSECOND, trx_started, NOW(6))
			FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ?`
	}
	var start dbMicros
	if err := tg.DB.QueryRowContext(context.Background(), q, session).Scan(&start); err != nil {
		t.Fatalf("transaction of session %d: %v", session, err)
	}
	return start
}

// TestKilledHolderFreesLockAtOnce: SIGKILL a holder; a waiter blocked in
// the database gets the lock, freed by the death of the holder's
// connection. "At once" is not measured on the wall clock (a loaded
// machine stretches any figure); it is shown by causality, on the database
// clock: the waiter was blocked until the kill, and got the lock before
// any server timeout could have ended the holder's session, counted from
// the start of its transaction. Only the end of the connection, at the
// process's death, can have freed it.
func TestKilledHolderFreesLockAtOnce(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			child := testdb.Child(t, "TestChildHolder", "SQLLOCK_CHILD_LOCK="+name, "SQLLOCK_CHILD_DIALECT="+tg.Name)
			waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			line, err := child.WaitLine(waitCtx, "held ")
			if err != nil {
				t.Fatalf("child did not report holding the lock: %v", err)
			}
			var childToken, childSession, timeoutMS int64
			if _, err := fmt.Sscanf(line, "held %d %d %d", &childToken, &childSession, &timeoutMS); err != nil {
				t.Fatalf("child said %q: %v", line, err)
			}
			serverTimeout := time.Duration(timeoutMS) * time.Millisecond
			if serverTimeout != 0 && serverTimeout < childTTL {
				t.Fatalf("the child's session may be ended by the server after %v, before its TTL %v", serverTimeout, childTTL)
			}
			holderSince := txStart(t, tg, childSession)

			waiterDB := singleConnDB(t, tg)
			session := sessionID(t, tg, waiterDB)
			got := acquireAsync(ctx, newLocker(t, waiterDB), name)
			waitForState(t, tg, session, "waiting")
			select {
			case r := <-got:
				t.Fatalf("the waiter returned while the holder lived: %v", r.err)
			default:
			}
			beforeKill := dbNow(t, tg)
			killed := time.Now()
			child.Kill()
			r := await(t, got)
			acquiredBy := dbNow(t, tg) // the acquisition happened before
			if r.err != nil {
				t.Fatalf("Acquire after the holder was killed: %v", r.err)
			}
			t.Logf("acquired %v after SIGKILL (wall clock, for information)", time.Since(killed))
			if r.lock.Token() <= childToken {
				t.Fatalf("token %d after the dead holder's %d", r.lock.Token(), childToken)
			}
			if acquiredBy < beforeKill {
				t.Fatalf("database clock went back: acquired by %v, killed after %v", acquiredBy, beforeKill)
			}
			if serverTimeout != 0 {
				if earliest := holderSince + dbMicros(serverTimeout.Microseconds()); acquiredBy >= earliest {
					t.Fatalf("the waiter got the lock by %v, and a server timeout (%v from %v) could have ended the holder's session from %v: "+
						"not shown to be freed by the holder's death", acquiredBy, serverTimeout, holderSince, earliest)
				}
			}
			// The holder's session is gone with its process.
			waitForState(t, tg, childSession, "gone")
			release(t, r.lock)
		})
	}
}

// TestCutConnectionReleasesAtOnce: a holder whose connection is closed
// (its network path reset) frees the lock for a waiter at once, and learns
// it has lost the lock.
func TestCutConnectionReleasesAtOnce(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			proxy := testdb.NewProxy(t, tg.HostPort())
			holder := newLocker(t, testdb.Open(t, tg, tg.DSNVia(proxy.Addr())))
			waiterDB := singleConnDB(t, tg)
			session := sessionID(t, tg, waiterDB)

			k := acquire(t, ctx, holder, name, dblock.TTL(time.Hour))
			got := acquireAsync(ctx, newLocker(t, waiterDB), name)
			waitForState(t, tg, session, "waiting")
			proxy.Cut()
			r := await(t, got)
			if r.err != nil {
				t.Fatalf("Acquire after the holder was cut off: %v", r.err)
			}
			// The holder's next ping (every TTL/3) fails: Refresh pings now.
			if err := k.Refresh(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Refresh of the cut-off holder = %v, want ErrLockLost", err)
			}
			select {
			case <-k.Done():
			default:
				t.Fatal("Done not closed after the lock was lost")
			}
			if err := k.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Release of a lost lock = %v, want ErrLockLost", err)
			}
			release(t, r.lock)
		})
	}
}

// TestPartitionedHolder: a holder whose network goes silent (no reset, no
// packets) is ended by the server's idle timeout, the TTL; the holder
// declares the lock lost before anyone else gets it, by the order of
// events.
func TestPartitionedHolder(t *testing.T) {
	const ttl = 3 * time.Second
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			proxy := newFreezeProxy(t, tg.HostPort())
			holder := newLocker(t, testdb.Open(t, tg, tg.DSNVia(proxy.Addr())))
			waiterDB := singleConnDB(t, tg)
			session := sessionID(t, tg, waiterDB)

			k := acquire(t, ctx, holder, name, dblock.TTL(ttl))
			got := acquireAsync(ctx, newLocker(t, waiterDB), name)
			waitForState(t, tg, session, "waiting")
			proxy.Freeze()
			r := await(t, got)
			if r.err != nil {
				t.Fatalf("Acquire after the holder was partitioned: %v", r.err)
			}
			select {
			case <-k.Done():
			default:
				t.Fatal("another holder got the lock before the partitioned one declared it lost")
			}
			if !errors.Is(k.Err(), dblock.ErrLockLost) {
				t.Fatalf("partitioned holder's Err = %v, want ErrLockLost", k.Err())
			}
			if err := k.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Release of a lost lock = %v, want ErrLockLost", err)
			}
			release(t, r.lock)
		})
	}
}

// TestContentionOnBrokenConnection: when the server answers an attempt
// with contention (MariaDB's NOWAIT answer, PostgreSQL's lock_timeout) and
// the connection breaks before the attempt is rolled back, Acquire reports
// the broken connection. Contention never reaches users: they would retry
// a lock that is not the problem. (Found by the torture suite, where a
// cut met a lock wait timeout.)
func TestContentionOnBrokenConnection(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			holder := acquire(t, ctx, newLocker(t, tg.DB), name)
			defer release(t, holder)

			proxy := newFreezeProxy(t, tg.HostPort())
			dsn := tg.DSNVia(proxy.Addr())
			if tg.Dialect == dblock.Postgres {
				// In plain text, so that the proxy sees the error; and a
				// server-side lock_timeout, so that the wait ends in
				// contention (55P03) instead of blocking.
				u, err := url.Parse(dsn)
				if err != nil {
					t.Fatal(err)
				}
				qs := u.Query()
				qs.Set("sslmode", "disable")
				qs.Set("lock_timeout", "100")
				u.RawQuery = qs.Encode()
				dsn = u.String()
			}
			// MariaDB's NOWAIT error, MySQL 8.0's, PostgreSQL's SQLSTATE.
			proxy.CutAfter("Lock wait timeout exceeded", "NOWAIT is set", "55P03")
			db := testdb.Open(t, tg, dsn)

			k, err := newLocker(t, db).Acquire(ctx, name)
			switch {
			case err == nil:
				release(t, k)
				t.Fatal("Acquire of a held name on a connection cut after contention succeeded")
			case errors.Is(err, dblock.ErrNotAcquired):
				t.Fatalf("Acquire = %v, want the connection's error, not ErrNotAcquired", err)
			}
			if c := lockkit.ClassifyError(err); c == lockkit.ClassContention || c == lockkit.ClassLockUnavailable {
				t.Fatalf("Acquire = %v: contention reached the user", err)
			}
		})
	}
}
