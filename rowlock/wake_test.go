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
// lock before the holder's lease end. Three waiters of two Lockers wait
// at once: each Locker's first waiter asks for the wake-up, and the
// second waiter of one Locker is handed on when the first leaves. The
// Lockers share the process but nothing else: each wakes the other's
// waiters only through the database, as if it were another process.
//
// Two corners fall back to polling (every 5 to 10 ms by default), which
// the hour-long pauses here would turn into a hang, so the test stays out
// of them: a waiter that meets a lock being handed to an older fair
// waiter of another Locker has no release to ask for (the waiters are all
// unfair), and one that finds, twice in a row, that the hold its try met
// ended before it could ask for a wake-up tries once at once and then
// polls (each hold here lasts holdBeforeRelease, far longer than the
// round trip between a try and its request).
func TestWokenAcrossProcesses(t *testing.T) {
	const holdBeforeRelease = 200 * time.Millisecond
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
				for _, l := range []*rowlock.Locker{a, a, b} {
					go func() {
						k, err := l.Acquire(ctx, name)
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
					time.Sleep(holdBeforeRelease)
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

// TestWokenAcrossLockers: a waiter that never polls is woken by the release
// of another Locker of the same process on one *sql.DB, on every dialect
// (NOTIFY on PostgreSQL, the doorbell on MySQL), fair or not. Each Locker
// wakes its own waiters in memory and shares nothing with the others: the
// release of another Locker reaches the waiter through the database, as one
// from another process does. The holder's lease is longer than the test
// may run, so a waiter that got the lock was woken.
func TestWokenAcrossLockers(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		for _, fair := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fair=%v", tg.Name, fair), func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
				defer cancel()
				name := testdb.Name(t)
				holderLocker := newLocker(t, tg.DB)
				waiter := newLocker(t, tg.DB, rowlock.WithPollInterval(time.Hour, time.Hour), rowlock.WithIdleRecheck(time.Hour))
				held, err := holderLocker.TryAcquire(ctx, name, dblock.TTL(wakeTestTTL))
				if err != nil {
					t.Fatal(err)
				}
				leaseEnd := expiresAtMicros(t, tg, name)
				var opts []dblock.Option
				if fair {
					opts = append(opts, dblock.Fair())
				}
				results := make(chan acquired, 1)
				go func() {
					k, err := waiter.Acquire(ctx, name, opts...)
					results <- acquired{k, err}
				}()
				eventually(t, ctx, "the waiter to ask for a wake-up", func() bool { return wanted(t, tg, name) })
				release(t, held)
				r := <-results
				if r.err != nil {
					t.Fatalf("Acquire after the other Locker's release: %v", r.err)
				}
				checkTakenBefore(t, tg, r.lock, name, leaseEnd, held.Token(), "not woken")
				release(t, r.lock)
			})
		}
	}
}

// TestKindsWokenAcrossLockers: a semaphore's or a read/write lock's waiter
// that never polls is woken by another Locker's release, on every dialect
// (NOTIFY on PostgreSQL, the holder's doorbell on MySQL). The holder's
// lease is longer than the test may run, so a waiter that got in within
// the test's minute was woken.
func TestKindsWokenAcrossLockers(t *testing.T) {
	semaphore1 := func(l *rowlock.Locker) dblock.Locker {
		s, err := l.Semaphore(1)
		if err != nil {
			panic(err) // a limit of 1 is valid
		}
		return s
	}
	readers := func(l *rowlock.Locker) dblock.Locker { return l.Readers() }
	writers := func(l *rowlock.Locker) dblock.Locker { return l.Writers() }
	for _, tg := range testdb.Targets(t) {
		for _, c := range []struct {
			name           string
			holder, waiter func(*rowlock.Locker) dblock.Locker
		}{
			{"semaphore", semaphore1, semaphore1},
			{"writer-after-reader", readers, writers},
			{"reader-after-writer", writers, readers},
			{"writer-after-writer", writers, writers},
		} {
			t.Run(tg.Name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // what proves the wake-up
				defer cancel()
				name := testdb.Name(t)
				holderLocker := newLocker(t, tg.DB)
				waiterLocker := newLocker(t, tg.DB, rowlock.WithPollInterval(time.Hour, time.Hour), rowlock.WithIdleRecheck(time.Hour))
				held, err := c.holder(holderLocker).TryAcquire(ctx, name, dblock.TTL(wakeTestTTL))
				if err != nil {
					t.Fatal(err)
				}
				results := make(chan acquired, 1)
				go func() {
					k, err := c.waiter(waiterLocker).Acquire(ctx, name)
					results <- acquired{k, err}
				}()
				// Until the waiter has asked for the wake-up, the release
				// would not announce itself.
				eventually(t, ctx, "the waiter to ask for a wake-up", func() bool { return anyWanted(t, tg, name) })
				release(t, held)
				r := <-results
				if r.err != nil {
					t.Fatalf("Acquire after the other Locker's release: %v", r.err)
				}
				release(t, r.lock)
			})
		}
	}
}

// anyWanted reads whether a waiter asked for the release of one of the rows
// of name (a semaphore's slots, a read/write lock's rows) to be announced.
func anyWanted(t testing.TB, tg testdb.Target, name string) bool {
	t.Helper()
	q := tg.Q(`SELECT count(*) FROM dblock_locks WHERE name LIKE $1 AND wanted`)
	var n int
	if err := tg.DB.QueryRowContext(context.Background(), q, name+"%").Scan(&n); err != nil {
		t.Fatalf("wanted rows of %q: %v", name, err)
	}
	return n > 0
}
