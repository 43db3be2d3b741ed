package rowlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// These tests run every lock kind over every database/sql driver sqllock
// accepts (testdb.DriverTargets): pgx's driver, a pgxpool through
// stdlib.OpenDBFromPool, lib/pq, go-sql-driver/mysql and modernc's SQLite.
// A driver that takes statements differently (lib/pq takes no pgx exec
// mode, and prepares nothing unless asked) must still hold, exclude, and
// have its session marker recorded, so that a killed holder is taken over
// after the crash grace and not after its lease.

// driverKind is one lock kind as the driver tests take it.
type driverKind struct {
	name string
	// take acquires name's lock of this kind with l, waiting or not.
	take func(ctx context.Context, l *rowlock.Locker, name string, wait bool) (dblock.Lock, error)
	// row is the row (in dblock_locks) that tells when the hold was
	// taken, and by which session.
	row func(name string) string
	// rival is the lock of another owner that the hold must exclude.
	rival func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error)
	// onSQLite: the kind exists on SQLite (the lock kinds need a server).
	onSQLite bool
}

var driverKinds = []driverKind{
	{
		name: "mutex",
		take: func(ctx context.Context, l *rowlock.Locker, name string, wait bool) (dblock.Lock, error) {
			if wait {
				return l.Acquire(ctx, name)
			}
			return l.TryAcquire(ctx, name)
		},
		row: func(name string) string { return name },
		rival: func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
			return l.TryAcquire(ctx, name)
		},
		onSQLite: true,
	},
	{
		name: "semaphore",
		take: func(ctx context.Context, l *rowlock.Locker, name string, wait bool) (dblock.Lock, error) {
			s, err := l.Semaphore(1)
			if err != nil {
				return nil, err
			}
			if wait {
				return s.Acquire(ctx, name)
			}
			return s.TryAcquire(ctx, name)
		},
		row: func(name string) string { return name + lockinput.KindSeparator + "s0" },
		rival: func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
			s, err := l.Semaphore(1)
			if err != nil {
				return nil, err
			}
			return s.TryAcquire(ctx, name)
		},
	},
	{
		name: "read-write",
		take: func(ctx context.Context, l *rowlock.Locker, name string, wait bool) (dblock.Lock, error) {
			if wait {
				return l.Writers().Acquire(ctx, name)
			}
			return l.Writers().TryAcquire(ctx, name)
		},
		row: func(name string) string { return name + lockinput.KindSeparator + "w" },
		rival: func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
			return l.Readers().TryAcquire(ctx, name)
		},
	},
	{
		name: "multi",
		take: func(ctx context.Context, l *rowlock.Locker, name string, wait bool) (dblock.Lock, error) {
			names := []string{name + "-a", name + "-b"}
			if wait {
				return l.AcquireAll(ctx, names)
			}
			return l.TryAcquireAll(ctx, names)
		},
		row: func(name string) string { return name + "-a" },
		rival: func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
			return l.TryAcquireAll(ctx, []string{name + "-b", name + "-c"})
		},
	},
}

func driverKindNamed(t testing.TB, name string) driverKind {
	t.Helper()
	for _, k := range driverKinds {
		if k.name == name {
			return k
		}
	}
	t.Fatalf("no lock kind %q", name)
	return driverKind{}
}

// warnings records the Warn (and worse) lines a Locker logs.
type warnings struct {
	mu    sync.Mutex
	lines []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	w.mu.Lock()
	w.lines = append(w.lines, b.String())
	w.mu.Unlock()
	return nil
}

func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// check fails the test if anything was logged at Warn or above, but for
// the one line a driver other than pgx's always gets on PostgreSQL (no
// LISTEN: waiters poll), said once per Locker.
func (w *warnings) check(t testing.TB, tg testdb.Target) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.lines {
		if tg.Name == testdb.DriverPq && strings.HasPrefix(l, "rowlock: LISTEN needs the pgx driver; waiters poll") {
			continue
		}
		t.Errorf("logged: %s", l)
	}
}

// TestDriversKinds: on every driver, each lock kind is held, excludes
// another owner, is free again once released, and its row records the
// holder's session marker (crash detection works) with nothing logged at
// Warn (with lib/pq the marker's statement lost its argument: every take
// logged the session's failure, and recorded no marker).
func TestDriversKinds(t *testing.T) {
	for _, tg := range testdb.DriverTargets(t) {
		for _, kind := range driverKinds {
			if tg.Dialect == dblock.SQLite && !kind.onSQLite {
				continue // the lock kinds need a server (errKindsOnSQLite)
			}
			t.Run(tg.Name+"/"+kind.name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
				defer cancel()
				var warned warnings
				logger := slog.New(&warned)
				a := newLocker(t, tg.DB, rowlock.WithLogger(logger))
				b := newLocker(t, tg.DB, rowlock.WithLogger(logger))
				name := testdb.Name(t)
				k, err := kind.take(ctx, a, name, false)
				if err != nil {
					t.Fatalf("take: %v", err)
				}
				if err := k.Err(); err != nil {
					t.Fatalf("Err while held: %v", err)
				}
				if tg.Dialect != dblock.SQLite {
					if key := sessionKeyOf(t, tg, kind.row(name)); key == 0 {
						t.Errorf("the hold's row records no session marker: a killed holder would keep it for its whole lease")
					}
				}
				if r, err := kind.rival(ctx, b, name); !errors.Is(err, dblock.ErrNotAcquired) {
					if r != nil {
						_ = r.Release(ctx)
					}
					t.Fatalf("another owner's take while held = %v, want ErrNotAcquired", err)
				}
				release(t, k)
				r, err := kind.rival(ctx, b, name)
				if err != nil {
					t.Fatalf("another owner's take once released: %v", err)
				}
				release(t, r)
				warned.check(t, tg)
			})
		}
	}
}

// TestChildDriverHolder is the body of TestDriversKilledHolder's child; in
// a normal run it returns at once. It takes SQLLOCK_CHILD_LOCK's lock of
// kind SQLLOCK_CHILD_KIND over driver SQLLOCK_CHILD_DRIVER, with the
// default TTL and crash grace, says "held <token>", and waits to be
// killed.
func TestChildDriverHolder(t *testing.T) {
	if !testdb.IsChild() {
		return
	}
	tg := testdb.DriverTarget(t, os.Getenv("SQLLOCK_CHILD_DRIVER"))
	kind := driverKindNamed(t, os.Getenv("SQLLOCK_CHILD_KIND"))
	l, err := rowlock.New(tg.DB)
	if err != nil {
		t.Fatal(err)
	}
	k, err := kind.take(context.Background(), l, os.Getenv("SQLLOCK_CHILD_LOCK"), true)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("held %d\n", k.Token())
	select {} // until killed
}

// TestDriversKilledHolder: on every driver with crash detection (the
// servers'), a holder of each kind SIGKILLed with 30 s of lease left is
// taken over by a waiter in another process before that lease ends, by
// the database clock: its session marker went with it.
func TestDriversKilledHolder(t *testing.T) {
	for _, tg := range testdb.DriverTargets(t) {
		if tg.Dialect == dblock.SQLite {
			continue // no sessions, no crash detection: the lease decides
		}
		for _, kind := range driverKinds {
			t.Run(tg.Name+"/"+kind.name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
				defer cancel()
				name := testdb.Name(t)
				child := testdb.Child(t, "TestChildDriverHolder", append(tg.ChildEnv(),
					"SQLLOCK_CHILD_LOCK="+name, "SQLLOCK_CHILD_KIND="+kind.name, "SQLLOCK_CHILD_DRIVER="+tg.Name)...)
				childToken := heldToken(t, ctx, child)
				row := kind.row(name)
				if key := sessionKeyOf(t, tg, row); key == 0 {
					t.Errorf("the child's row records no session marker")
				}
				leaseEnd := expiresAtMicros(t, tg, row)
				var warned warnings
				waiter := newLocker(t, tg.DB, rowlock.WithLogger(slog.New(&warned)))
				got := make(chan acquired, 1)
				go func() {
					k, err := kind.take(ctx, waiter, name, true)
					got <- acquired{k, err}
				}()
				killedAt := dbNowMicros(t, tg)
				child.Kill()
				r := <-got
				if r.err != nil {
					t.Fatalf("take after the holder was killed: %v", r.err)
				}
				defer release(t, r.lock)
				taken := checkTakenBefore(t, tg, r.lock, row, leaseEnd, childToken, "the dead holder's lease was not cut short")
				t.Logf("taken %v after SIGKILL (database clock)", time.Duration(taken-killedAt)*time.Microsecond)
				warned.check(t, tg)
			})
		}
	}
}

// TestSessionMarkerWithoutListen: with LISTEN turned off, a PostgreSQL
// session goes through database/sql whatever the driver, and its marker
// statement must keep its argument there too (pgx refused it without:
// no marker, and the session's failure logged at every take).
func TestSessionMarkerWithoutListen(t *testing.T) {
	for _, tg := range testdb.DriverTargets(t) {
		if tg.Dialect != dblock.Postgres {
			continue // LISTEN is PostgreSQL's
		}
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			var warned warnings
			l := newLocker(t, tg.DB, rowlock.WithListen(false), rowlock.WithLogger(slog.New(&warned)))
			name := testdb.Name(t)
			k, err := l.TryAcquire(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			defer release(t, k)
			if key := sessionKeyOf(t, tg, name); key == 0 {
				t.Errorf("the hold's row records no session marker")
			}
			warned.check(t, tg)
		})
	}
}
