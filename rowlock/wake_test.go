package rowlock_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// wakeTestTTL is the lease of the holder in TestWokenAcrossProcesses: far
// beyond the test's liveness bound, so that no waiter can get the lock by
// waiting for the lease to lapse.
const wakeTestTTL = 10 * time.Minute

// TestChildHolderReleasesOnSignal is the body of the holder process of
// TestWokenAcrossProcesses; in a normal run it returns at once. It takes
// SQLLOCK_CHILD_LOCK with a 10-minute lease, and another lock that it keeps,
// says "held <token>", releases the first on SIGUSR1 and says "released".
func TestChildHolderReleasesOnSignal(t *testing.T) {
	if !testdb.IsChild() {
		return
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	name, dialect := os.Getenv("SQLLOCK_CHILD_LOCK"), os.Getenv("SQLLOCK_CHILD_DIALECT")
	for _, tg := range testdb.Targets(t) {
		if tg.Name != dialect {
			continue
		}
		l, err := rowlock.New(tg.DB)
		if err != nil {
			t.Fatal(err)
		}
		k, err := l.Acquire(context.Background(), name, dblock.TTL(wakeTestTTL))
		if err != nil {
			t.Fatal(err)
		}
		// A second lock, held until killed, keeps the Locker's session
		// connection: its end would wake waiters too (as a crash does).
		if _, err := l.Acquire(context.Background(), name+"/kept"); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("held %d\n", k.Token())
		<-usr1
		if err := k.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		fmt.Println("released")
		select {} // until killed
	}
}

// TestWokenAcrossProcesses: waiters that never poll (their pauses are an
// hour long) are woken in another process than the holder's, on every
// dialect, when the holder releases (NOTIFY on PostgreSQL, the doorbell on
// MySQL) and when it dies (its session's end, seen through the marker on
// PostgreSQL and through the doorbell on MySQL, cuts its lease short).
// The holder's lease is longer than the test may run, so a waiter that got
// the lock was woken, not timed out; the database clock shows it got the
// lock before the holder's lease end. Waiters of two Lockers (fair and
// unfair) wait at once; the first to get the lock wakes the next in
// memory.
func TestWokenAcrossProcesses(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		for _, ending := range []string{"release", "SIGKILL"} {
			t.Run(tg.Name+"/"+ending, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
				defer cancel()
				name := testdb.Name(t)
				child := testdb.Child(t, "TestChildHolderReleasesOnSignal",
					"SQLLOCK_CHILD_LOCK="+name, "SQLLOCK_CHILD_DIALECT="+tg.Name)
				childToken := heldToken(t, ctx, child)
				leaseEnd := expiresAtMicros(t, tg, name)
				never := []rowlock.Option{rowlock.WithPollInterval(time.Hour, time.Hour), rowlock.WithIdleRecheck(time.Hour)}
				a, b := newLocker(t, tg.DB, never...), newLocker(t, tg.DB, never...)
				results := make(chan acquired, 3)
				for i, l := range []*rowlock.Locker{a, a, b} {
					var opts []dblock.Option
					if i == 1 {
						opts = append(opts, dblock.Fair())
					}
					go func() {
						k, err := l.Acquire(ctx, name, opts...)
						if err == nil {
							results <- acquired{k, err}
							return
						}
						results <- acquired{nil, err}
					}()
				}
				// The first waiter of each Locker asks the holder's
				// release to wake it before it sleeps.
				eventually(t, ctx, "a waiter to ask for a wake-up", func() bool { return wanted(t, tg, name) })
				switch ending {
				case "release":
					childReleases(t, ctx, child)
				case "SIGKILL":
					child.Kill()
				}
				for range 3 {
					r := <-results
					if r.err != nil {
						t.Fatalf("Acquire after the holder's %s: %v", ending, r.err)
					}
					checkTakenBefore(t, tg, r.lock, name, leaseEnd, childToken, "not woken")
					release(t, r.lock)
				}
			})
		}
	}
}

// TestSweepDeletesDeadDoorbells: a whole sweep deletes the doorbell record
// of a session whose marker is free, and keeps that of a live session.
func TestSweepDeletesDeadDoorbells(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		if tg.Dialect != dblock.MySQL {
			continue // PostgreSQL wakes waiters by NOTIFY: no records
		}
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			k, err := l.TryAcquire(ctx, testdb.Name(t))
			if err != nil {
				t.Fatal(err)
			}
			defer release(t, k)
			var live int64
			if err := tg.DB.QueryRowContext(ctx, `SELECT session_key FROM dblock_locks WHERE name = ?`, k.Name()).Scan(&live); err != nil || live == 0 {
				t.Fatalf("the holder's session key: %d, %v", live, err)
			}
			// A key that no session holds, as a session that died
			// leaves it.
			const dead = int64(1)<<62 + 12345
			if _, err := tg.DB.ExecContext(ctx, `INSERT INTO dblock_sessions (session_key, bell, started_at) VALUES (?, 7, UTC_TIMESTAMP(6))`, dead); err != nil {
				t.Fatal(err)
			}
			sweepAll(t, ctx, l, time.Hour, 1000)
			for _, c := range []struct {
				key  int64
				want bool
			}{{live, true}, {dead, false}} {
				var n int
				if err := tg.DB.QueryRowContext(ctx, `SELECT count(*) FROM dblock_sessions WHERE session_key = ?`, c.key).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if (n == 1) != c.want {
					t.Errorf("record of session %d after a sweep: %d rows, want kept=%v", c.key, n, c.want)
				}
			}
		})
	}
}

// TestChildHolderWithRecordStuck is the body of the holder process of
// TestWaiterFollowsARingNotYetRecorded; in a normal run it returns at
// once. It takes SQLLOCK_CHILD_LOCK (10-minute lease) and a lock it keeps,
// then locks its session's doorbell record in a transaction of its own, so
// that a ring's record waits. SIGUSR1 releases the lock (once, "released"),
// SIGUSR2 takes it again ("held <token>"), and the next SIGUSR1 first lets
// the record go (commits) and then releases it ("released").
func TestChildHolderWithRecordStuck(t *testing.T) {
	if !testdb.IsChild() {
		return
	}
	usr1, usr2 := make(chan os.Signal, 1), make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	signal.Notify(usr2, syscall.SIGUSR2)
	name := os.Getenv("SQLLOCK_CHILD_LOCK")
	ctx := context.Background()
	for _, tg := range testdb.Targets(t) {
		if tg.Dialect != dblock.MySQL {
			continue
		}
		l, err := rowlock.New(tg.DB)
		if err != nil {
			t.Fatal(err)
		}
		k, err := l.Acquire(ctx, name, dblock.TTL(wakeTestTTL))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Acquire(ctx, name+"/kept"); err != nil {
			t.Fatal(err)
		}
		stuck, err := tg.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var one int
		if err := stuck.QueryRowContext(ctx, `
SELECT 1 FROM dblock_sessions
WHERE session_key = (SELECT session_key FROM dblock_locks WHERE name = ?) FOR UPDATE`, name).Scan(&one); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("held %d\n", k.Token())
		<-usr1
		if err := k.Release(ctx); err != nil {
			t.Fatal(err)
		}
		fmt.Println("released")
		<-usr2
		if k, err = l.Acquire(ctx, name, dblock.TTL(wakeTestTTL)); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("held %d\n", k.Token())
		<-usr1
		if err := stuck.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := k.Release(ctx); err != nil {
			t.Fatal(err)
		}
		fmt.Println("released")
		select {} // until killed
	}
}

// TestWaiterFollowsARingNotYetRecorded: a MySQL waiter that reads a
// holder's bell generation after a ring but before the ring's record (the
// record is held up here; it is a write, and lags every ring a little)
// waits on the next bell, and is woken by the next ring. Reading the
// recorded generation alone, it would find the bell it already saw ring,
// decline it and poll, here never (its pauses are an hour long): the test
// would hang. The holder is another process whose lease outlasts the test.
func TestWaiterFollowsARingNotYetRecorded(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		if tg.Dialect != dblock.MySQL {
			continue // PostgreSQL wakes waiters by NOTIFY
		}
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			name := testdb.Name(t)
			child := testdb.Child(t, "TestChildHolderWithRecordStuck", "SQLLOCK_CHILD_LOCK="+name)
			signalChild := func(sig os.Signal, says string) {
				t.Helper()
				if err := child.Cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				if _, err := child.WaitLine(ctx, says); err != nil {
					t.Fatal(err)
				}
			}
			heldToken(t, ctx, child)
			l := newLocker(t, tg.DB, rowlock.WithPollInterval(time.Hour, time.Hour), rowlock.WithIdleRecheck(time.Hour))
			// The first wait: woken by the ring of the first bell, whose
			// record then waits.
			got := acquireAsync(ctx, l, name)
			eventually(t, ctx, "the first waiter to arm the release", func() bool { return wanted(t, tg, name) })
			signalChild(syscall.SIGUSR1, "released")
			r := <-got
			if r.err != nil {
				t.Fatalf("first Acquire: %v", r.err)
			}
			release(t, r.lock)
			signalChild(syscall.SIGUSR2, "held ")
			// The second wait reads the generation while the record of
			// the first ring still waits.
			got = acquireAsync(ctx, l, name)
			eventually(t, ctx, "the second waiter to arm the release", func() bool { return wanted(t, tg, name) })
			signalChild(syscall.SIGUSR1, "released")
			if r = <-got; r.err != nil {
				t.Fatalf("second Acquire, after a ring not yet recorded: %v", r.err)
			}
			release(t, r.lock)
		})
	}
}

// TestBellWaitBesideMarkerWait: a MySQL waiter that arms a holder's bell is
// woken by the ring even while the watcher waits on that holder's marker
// for another name (as it does for a waiter that read a bell already
// rung). When one wait served each holder's session, the waiter was told
// that a ring would wake it while that wait was the marker's, and slept
// until the marker wait ended: here never (that wait lasts an hour, and
// so do the waiter's pauses), so the test would hang.
func TestBellWaitBesideMarkerWait(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		if tg.Dialect != dblock.MySQL {
			continue // PostgreSQL wakes waiters by NOTIFY
		}
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			name := testdb.Name(t)
			child, key := markedChildHolder(t, ctx, tg, name)
			l := newLocker(t, tg.DB, rowlock.WithPollInterval(time.Hour, time.Hour), rowlock.WithIdleRecheck(time.Hour))
			if !rowlock.WatchMarkerFor(l, name+"/other", key, time.Hour) {
				t.Fatal("the watcher did not wait on the holder's marker")
			}
			got := acquireAsync(ctx, l, name)
			eventually(t, ctx, "the waiter to arm the release", func() bool { return wanted(t, tg, name) })
			childReleases(t, ctx, child)
			r := <-got
			if r.err != nil {
				t.Fatalf("Acquire, its holder's marker watched for another name: %v", r.err)
			}
			release(t, r.lock)
		})
	}
}

// TestBellsOfAnEndedSessionDeclined: once a MySQL waiter's Locker has
// found a holder's session ended, it waits on none of that session's bells
// again. They are all free: a wait on one would return at once, again and
// again, each round a try, an arming and a shortening, until the lease it
// had cut short lapsed (about 250 rounds a second were seen).
func TestBellsOfAnEndedSessionDeclined(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		if tg.Dialect != dblock.MySQL {
			continue // PostgreSQL has no bells
		}
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			name := testdb.Name(t)
			child, key := markedChildHolder(t, ctx, tg, name)
			l := newLocker(t, tg.DB)
			got := acquireAsync(ctx, l, name)
			eventually(t, ctx, "the waiter to arm the release", func() bool { return wanted(t, tg, name) })
			child.Kill()
			// The lease is ten minutes: taken now, it was cut short, so
			// the Locker found the session ended.
			r := <-got
			if r.err != nil {
				t.Fatalf("Acquire after the holder was killed: %v", r.err)
			}
			release(t, r.lock)
			if rowlock.WatchBell(l, name+"/other", key, 1<<40) {
				t.Error("the watcher waits on a bell of a session it found ended")
			}
		})
	}
}

// markedChildHolder starts a TestChildHolderReleasesOnSignal child that
// holds name, and returns it with the session marker key its row records.
func markedChildHolder(t *testing.T, ctx context.Context, tg testdb.Target, name string) (*testdb.ChildProcess, int64) {
	t.Helper()
	child := testdb.Child(t, "TestChildHolderReleasesOnSignal", "SQLLOCK_CHILD_LOCK="+name, "SQLLOCK_CHILD_DIALECT="+tg.Name)
	heldToken(t, ctx, child)
	key := sessionKeyOf(t, tg, name)
	if key == 0 {
		t.Fatal("the holder's row records no session marker")
	}
	return child, key
}
