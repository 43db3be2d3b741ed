package rowlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/queue"
	"github.com/sqllock/sqllock/rowlock"
)

// These tests show crash detection (see the package doc): a dead holder's
// lock, or a dead fair waiter's place, is given up after about the crash
// grace instead of its lease, and a live holder always stops first. They
// prove it by causality, not by the wall clock: the lock is taken (by the
// database clock) before the dead holder's lease could have run out, which
// only a shortened lease allows; and where the holder lives on, its Done is
// closed before the next holder's Acquire returns.

// TestChildMarkedHolder is the body of the child process of the crash
// tests; in a normal run it returns at once. It takes SQLLOCK_CHILD_LOCK
// with the default TTL and crash grace, says "held <token>", and then
// "lost" if it finds the lock lost (after a pause past the grace), and
// releases it.
func TestChildMarkedHolder(t *testing.T) {
	if !testdb.IsChild() {
		return
	}
	name, dialect := os.Getenv("SQLLOCK_CHILD_LOCK"), os.Getenv("SQLLOCK_CHILD_DIALECT")
	for _, tg := range testdb.Targets(t) {
		if tg.Name != dialect {
			continue
		}
		l, err := rowlock.New(tg.DB)
		if err != nil {
			t.Fatal(err)
		}
		k, err := l.Acquire(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("held %d\n", k.Token())
		<-k.Done()
		fmt.Printf("lost %v\n", k.Err())
		_ = k.Release(context.Background())
		select {} // until killed
	}
}

// TestKilledHolderGivesUpWithinGrace: SIGKILL a holder whose lease has 30
// seconds to run; a waiter in another process gets the lock long before,
// once the holder's session marker is gone and the shortened lease has
// lapsed.
func TestKilledHolderGivesUpWithinGrace(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			name := testdb.Name(t)
			child := testdb.Child(t, "TestChildMarkedHolder", "SQLLOCK_CHILD_LOCK="+name, "SQLLOCK_CHILD_DIALECT="+tg.Name)
			childToken := heldToken(t, ctx, child)
			leaseEnd := expiresAtMicros(t, tg, name)
			got := acquireAsync(ctx, newLocker(t, tg.DB), name)
			killedAt := dbNowMicros(t, tg)
			start := time.Now()
			child.Kill()
			r := <-got
			if r.err != nil {
				t.Fatalf("Acquire after the holder was killed: %v", r.err)
			}
			defer release(t, r.lock)
			acquired := checkTakenBefore(t, tg, r.lock, name, leaseEnd, childToken, "its lease was not cut short")
			t.Logf("acquired %v after SIGKILL (database clock; %v on the wall clock, for information)",
				time.Duration(acquired-killedAt)*time.Microsecond, time.Since(start))
		})
	}
}

// TestKilledFairWaiterPassedOverWithinGrace: the head of the fair queue,
// with the default waiter TTL, is SIGKILLed while the lock is held; once
// the lock is released the next fair waiter gets it before the dead
// waiter's place could have lapsed by its TTL.
func TestKilledFairWaiterPassedOverWithinGrace(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			l := newLocker(t, tg.DB)
			name := testdb.Name(t)
			holder, err := l.TryAcquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			child := testdb.Child(t, "TestChildFairWaiter", "SQLLOCK_CHILD_LOCK="+name, "SQLLOCK_CHILD_DIALECT="+tg.Name,
				"SQLLOCK_CHILD_WAITER_TTL="+queue.DefaultWaiterTTL.String())
			if _, err := child.WaitLine(ctx, "queued"); err != nil {
				t.Fatal(err)
			}
			got := make(chan acquired, 1)
			go func() {
				k, err := l.Acquire(ctx, name, dblock.Fair())
				got <- acquired{k, err}
			}()
			dead := waitQueued(t, l, name, 2)[0]
			deadExpires := waiterExpiresAtMicros(t, tg, dead.ID)
			child.Kill()
			killedAt := dbNowMicros(t, tg)
			release(t, holder)
			r := <-got
			if r.err != nil {
				t.Fatalf("fair waiter behind a dead one: %v", r.err)
			}
			defer release(t, r.lock)
			acquired := acquiredAtMicros(t, tg, name)
			t.Logf("acquired %v after SIGKILL of the queue's head (database clock)", time.Duration(acquired-killedAt)*time.Microsecond)
			if acquired >= deadExpires {
				t.Fatalf("the lock waited for the dead waiter's place to lapse by its TTL: it was not passed over early")
			}
		})
	}
}

// TestPausedHolderKeepsItsLease: SIGSTOP a holder for longer than the
// crash grace. Its session is alive, so its marker stays and nobody cuts
// its lease short while it sleeps; when it wakes, past its marker's
// deadline, it declares the lock lost (it cannot know what happened
// meanwhile) and releases it, and only then does the waiter get it.
func TestPausedHolderKeepsItsLease(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			name := testdb.Name(t)
			child := testdb.Child(t, "TestChildMarkedHolder", "SQLLOCK_CHILD_LOCK="+name, "SQLLOCK_CHILD_DIALECT="+tg.Name)
			if _, err := child.WaitLine(ctx, "held "); err != nil {
				t.Fatalf("child did not report holding the lock: %v", err)
			}
			got := acquireAsync(ctx, newLocker(t, tg.DB), name)
			leaseEnd := expiresAtMicros(t, tg, name)
			if err := child.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * rowlock.DefaultCrashGrace) // several waiters' checks
			stillEnd := expiresAtMicros(t, tg, name)
			select {
			case r := <-got:
				t.Fatalf("the waiter returned while the holder was paused: %v", r.err)
			default:
			}
			if err := child.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if stillEnd < leaseEnd {
				t.Fatalf("the paused holder's lease was cut short (%d < %d): its marker was judged gone", stillEnd, leaseEnd)
			}
			line, err := child.WaitLine(ctx, "lost ")
			if err != nil {
				t.Fatalf("the holder did not find its lock lost after the pause: %v", err)
			}
			r := <-got
			if r.err != nil {
				t.Fatalf("Acquire after the holder released: %v (it said %q)", r.err, line)
			}
			release(t, r.lock)
		})
	}
}

// TestSessionEndedUnderLiveHolder: the holder lives, but its session
// connection ends: killed by the server, cut by the network (both ends
// see it), or blackholed (the server sees its client vanish; the client
// sees nothing, and learns only from its heartbeat's deadline). Each time
// the holder's Done is closed before the waiter, in another Locker, gets
// the lock, and the waiter gets it before the holder's lease could have
// run out.
func TestSessionEndedUnderLiveHolder(t *testing.T) {
	cases := []struct {
		name string
		end  func(t *testing.T, tg testdb.Target, name string, proxy *testdb.Proxy)
	}{
		{"killed by the server", func(t *testing.T, tg testdb.Target, name string, _ *testdb.Proxy) {
			killMarkerSession(t, tg, name)
		}},
		{"connection cut", func(_ *testing.T, _ testdb.Target, _ string, proxy *testdb.Proxy) { proxy.Cut() }},
		{"blackholed", func(_ *testing.T, _ testdb.Target, _ string, proxy *testdb.Proxy) { proxy.Blackhole() }},
	}
	for _, tg := range testdb.Targets(t) {
		for _, c := range cases {
			t.Run(tg.Name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
				defer cancel()
				name := testdb.Name(t)
				proxy := testdb.NewProxy(t, tg.HostPort())
				sessions := testdb.Open(t, tg, tg.DSNVia(proxy.Addr()))
				// Cleanups run last first: cut the blackholed connections
				// before the pool waits for them to close.
				t.Cleanup(proxy.Cut)
				holderLocker := newLocker(t, tg.DB, rowlock.WithSessionDB(sessions))
				holder, err := holderLocker.Acquire(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = holder.Release(context.Background()) }()
				leaseEnd := expiresAtMicros(t, tg, name)
				got := acquireAsync(ctx, newLocker(t, tg.DB), name)
				c.end(t, tg, name, proxy)
				r := <-got
				if r.err != nil {
					t.Fatalf("Acquire after the holder's session ended: %v", r.err)
				}
				defer release(t, r.lock)
				select {
				case <-holder.Done():
				default:
					t.Fatal("the waiter got the lock while the holder still held it (Done open)")
				}
				if err := holder.Err(); !errors.Is(err, dblock.ErrLockLost) {
					t.Fatalf("holder's Err = %v, want ErrLockLost", err)
				}
				if acquired := acquiredAtMicros(t, tg, name); acquired >= leaseEnd {
					t.Fatalf("acquired at the holder's lease end or after: its lease was not cut short")
				}
			})
		}
	}
}

// killMarkerSession ends, from the server, the session that holds the
// marker recorded in name's row.
func killMarkerSession(t *testing.T, tg testdb.Target, name string) {
	t.Helper()
	ctx := t.Context()
	var key int64
	q := tg.Q(`SELECT session_key FROM dblock_locks WHERE name = $1 AND session_token = token`)
	if err := tg.DB.QueryRowContext(ctx, q, name).Scan(&key); err != nil || key == 0 {
		t.Fatalf("the row of %q records no marker: key %d, %v", name, key, err)
	}
	killSessionOfKey(t, tg, key)
}

// killSessionOfKey has the server end the session that holds the marker
// key.
func killSessionOfKey(t *testing.T, tg testdb.Target, key int64) {
	t.Helper()
	ctx := t.Context()
	if tg.Dialect == dblock.Postgres {
		var killed bool
		err := tg.DB.QueryRowContext(ctx, `
SELECT pg_terminate_backend(pid) FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 1 AND granted
  AND classid = ($1::bigint >> 32)::oid AND objid = ($1::bigint & 4294967295)::oid`, key).Scan(&killed)
		if err != nil || !killed {
			t.Fatalf("pg_terminate_backend of the marker's session: %v %v", killed, err)
		}
		return
	}
	var id int64
	if err := tg.DB.QueryRowContext(ctx, `SELECT IS_USED_LOCK(?)`, fmt.Sprintf("sqllock.%d", key)).Scan(&id); err != nil {
		t.Fatalf("the marker's session: %v", err)
	}
	if _, err := tg.DB.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err != nil {
		t.Fatalf("KILL %d: %v", id, err)
	}
}

// heldToken waits for the child's "held <token>" line and returns the
// token.
func heldToken(t *testing.T, ctx context.Context, child *testdb.ChildProcess) int64 {
	t.Helper()
	line, err := child.WaitLine(ctx, "held ")
	if err != nil {
		t.Fatalf("child did not report holding the lock: %v", err)
	}
	var token int64
	if _, err := fmt.Sscanf(line, "held %d", &token); err != nil {
		t.Fatalf("child said %q: %v", line, err)
	}
	return token
}

// checkTakenBefore fails the test unless k, whose row is row, was taken
// (by the database clock) before leaseEnd, the previous holder's lease
// end, with a token above prevToken, the previous holder's; why says what
// taking it at or after the lease end would mean. It returns when k was
// taken.
func checkTakenBefore(t *testing.T, tg testdb.Target, k dblock.Lock, row string, leaseEnd, prevToken int64, why string) (acquired int64) {
	t.Helper()
	acquired = acquiredAtMicros(t, tg, row)
	if acquired >= leaseEnd {
		t.Fatalf("taken at the previous holder's lease end or after: %s", why)
	}
	if k.Token() <= prevToken {
		t.Fatalf("token %d after the previous holder's %d", k.Token(), prevToken)
	}
	return acquired
}

// acquired is what an Acquire in the background returned.
type acquired struct {
	lock dblock.Lock
	err  error
}

// acquireAsync runs l.Acquire(ctx, name) in the background.
func acquireAsync(ctx context.Context, l *rowlock.Locker, name string) <-chan acquired {
	got := make(chan acquired, 1)
	go func() {
		k, err := l.Acquire(ctx, name)
		got <- acquired{k, err}
	}()
	return got
}

// TestSessionThatNeverStarts: a session database that accepts connections
// and never answers (a dead host behind a live load balancer) does not hold
// acquisitions up: they go on without a marker, the lease alone deciding.
func TestSessionThatNeverStarts(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			silent, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: the kernel's backlog does
			if err != nil {
				t.Fatal(err)
			}
			defer silent.Close()
			sessions := testdb.Open(t, tg, tg.DSNVia(silent.Addr().String()))
			l := newLocker(t, tg.DB, rowlock.WithSessionDB(sessions))
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // against hangs only
			defer cancel()
			name := testdb.Name(t)
			k, err := l.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("TryAcquire with a session database that never answers: %v", err)
			}
			defer release(t, k)
			q := tg.Q(`SELECT session_key FROM dblock_locks WHERE name = $1`)
			var key int64
			if err := tg.DB.QueryRowContext(ctx, q, name).Scan(&key); err != nil || key != 0 {
				t.Fatalf("the row records marker %d (%v), want none", key, err)
			}
		})
	}
}
