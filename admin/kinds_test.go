package admin_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/admin"
	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

func TestKindOfRow(t *testing.T) {
	sep := lockinput.KindSeparator
	for _, tc := range []struct {
		row  string
		kind admin.RowKind
		name string
		slot int
	}{
		{"jobs", admin.RowLock, "jobs", 0},
		{"jobs" + sep + "s0", admin.RowPermit, "jobs", 0},
		{"jobs" + sep + "s17", admin.RowPermit, "jobs", 17},
		{"cfg" + sep + "w", admin.RowWriter, "cfg", 0},
		{"cfg" + sep + "r63", admin.RowReader, "cfg", 63},
		// Not rows a kind derives: plain locks named so.
		{"x" + sep, admin.RowLock, "x" + sep, 0},
		{"x" + sep + "s", admin.RowLock, "x" + sep + "s", 0},
		{"x" + sep + "s01", admin.RowLock, "x" + sep + "s01", 0},
		{"x" + sep + "s-1", admin.RowLock, "x" + sep + "s-1", 0},
		{"x" + sep + "q1", admin.RowLock, "x" + sep + "q1", 0},
		{"x" + sep + "wr", admin.RowLock, "x" + sep + "wr", 0},
	} {
		kind, name, slot := admin.KindOfRow(tc.row)
		if kind != tc.kind || name != tc.name || slot != tc.slot {
			t.Errorf("KindOfRow(%q) = %s, %q, %d; want %s, %q, %d", tc.row, kind, name, slot, tc.kind, tc.name, tc.slot)
		}
	}
}

// HeldKinds sums up the rows Locks lists by semaphore and read/write
// lock: permits held against the recorded limit, readers, and a writer
// holding or waiting for the readers.
func TestHeldKinds(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			l := newLocker(t, tg)
			a := newAdmin(t, tg)
			sem, err := l.Semaphore(3)
			if err != nil {
				t.Fatal(err)
			}
			semName, readName, writeName := testdb.Name(t), testdb.Name(t), testdb.Name(t)
			for range 2 {
				p, err := sem.TryAcquire(ctx, semName)
				if err != nil {
					t.Fatal(err)
				}
				defer release(t, p)
			}
			// Two readers and a writer waiting for them; another lock
			// held by a writer alone.
			for range 2 {
				r, err := l.Readers().TryAcquire(ctx, readName)
				if err != nil {
					t.Fatal(err)
				}
				defer release(t, r)
			}
			defer waitingFor(t, ctx, func(ctx context.Context) (dblock.Lock, error) { return l.Writers().Acquire(ctx, readName) })()
			w, err := l.Writers().TryAcquire(ctx, writeName)
			if err != nil {
				t.Fatal(err)
			}
			defer release(t, w)

			wantSems := []admin.HeldSemaphore{{Name: semName, Held: 2, Limit: 3}}
			wantRWs := []admin.HeldRWLock{{Name: readName, Readers: 2, Writer: true}, {Name: writeName, Writer: true}}
			// In name order, as HeldKinds lists them.
			slices.SortFunc(wantRWs, func(a, b admin.HeldRWLock) int { return strings.Compare(a.Name, b.Name) })
			var sems []admin.HeldSemaphore
			var rws []admin.HeldRWLock
			// The waiting writer's row comes when its goroutine runs.
			bound, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			eventually(t, bound, "HeldKinds showing the semaphore and the read/write locks", func() bool {
				locks, err := a.Locks(ctx, 10000)
				if err != nil {
					t.Fatal(err)
				}
				if sems, rws, err = a.HeldKinds(ctx, locks); err != nil {
					t.Fatal(err)
				}
				sems = slices.DeleteFunc(sems, func(s admin.HeldSemaphore) bool { return s.Name != semName })
				rws = slices.DeleteFunc(rws, func(rw admin.HeldRWLock) bool { return rw.Name != readName && rw.Name != writeName })
				if !slices.Equal(sems, wantSems) || !slices.Equal(rws, wantRWs) {
					t.Logf("semaphores %+v, want %+v; read/write locks %+v, want %+v", sems, wantSems, rws, wantRWs)
					return false
				}
				return true
			})
		})
	}
}

// newLocker returns a Locker on tg that is closed when the test ends.
func newLocker(t testing.TB, tg testdb.Target) *rowlock.Locker {
	t.Helper()
	l, err := rowlock.New(tg.DB, rowlock.WithDialect(tg.Dialect))
	if err != nil {
		t.Fatalf("rowlock.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// newAdmin returns an Admin on tg that is closed when the test ends.
func newAdmin(t testing.TB, tg testdb.Target) *admin.Admin {
	t.Helper()
	a, err := admin.New(tg.DB, admin.WithDialect(tg.Dialect))
	if err != nil {
		t.Fatalf("admin.New: %v", err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// release releases k and fails the test on error.
func release(t testing.TB, k dblock.Lock) {
	t.Helper()
	if err := k.Release(context.Background()); err != nil {
		t.Fatalf("Release(%q): %v", k.Name(), err)
	}
}

// waitingFor runs acquire (an Acquire that must wait) in a goroutine. The
// function it returns ends the wait and fails the test unless acquire
// returned dblock.ErrNotAcquired, as a wait cut short does.
func waitingFor(t testing.TB, ctx context.Context, acquire func(context.Context) (dblock.Lock, error)) (stop func()) {
	waitCtx, cancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() {
		_, err := acquire(waitCtx)
		waited <- err
	}()
	return func() {
		t.Helper()
		cancel()
		if err := <-waited; !errors.Is(err, dblock.ErrNotAcquired) {
			t.Errorf("a wait cut short: %v, want ErrNotAcquired", err)
		}
	}
}

// eventually polls cond until it holds, failing the test if ctx ends first
// (a bound against hangs, not a timing assertion).
func eventually(t testing.TB, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("%s: %v", what, ctx.Err())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
