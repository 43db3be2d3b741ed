package rowlock_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

func TestKindOfRow(t *testing.T) {
	sep := rowlock.KindSeparator
	for _, tc := range []struct {
		row  string
		kind rowlock.RowKind
		name string
		slot int
	}{
		{"jobs", rowlock.RowLock, "jobs", 0},
		{"jobs" + sep + "s0", rowlock.RowPermit, "jobs", 0},
		{"jobs" + sep + "s17", rowlock.RowPermit, "jobs", 17},
		{"cfg" + sep + "w", rowlock.RowWriter, "cfg", 0},
		{"cfg" + sep + "r63", rowlock.RowReader, "cfg", 63},
		// Not rows a kind derives: plain locks named so.
		{"x" + sep, rowlock.RowLock, "x" + sep, 0},
		{"x" + sep + "s", rowlock.RowLock, "x" + sep + "s", 0},
		{"x" + sep + "s01", rowlock.RowLock, "x" + sep + "s01", 0},
		{"x" + sep + "s-1", rowlock.RowLock, "x" + sep + "s-1", 0},
		{"x" + sep + "q1", rowlock.RowLock, "x" + sep + "q1", 0},
		{"x" + sep + "wr", rowlock.RowLock, "x" + sep + "wr", 0},
	} {
		kind, name, slot := rowlock.KindOfRow(tc.row)
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
			l := newLocker(t, tg.DB)
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

			wantSems := []rowlock.HeldSemaphore{{Name: semName, Held: 2, Limit: 3}}
			wantRWs := []rowlock.HeldRWLock{{Name: readName, Readers: 2, Writer: true}, {Name: writeName, Writer: true}}
			// In name order, as HeldKinds lists them.
			slices.SortFunc(wantRWs, func(a, b rowlock.HeldRWLock) int { return strings.Compare(a.Name, b.Name) })
			var sems []rowlock.HeldSemaphore
			var rws []rowlock.HeldRWLock
			// The waiting writer's row comes when its goroutine runs.
			bound, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			eventually(t, bound, "HeldKinds showing the semaphore and the read/write locks", func() bool {
				locks, err := l.Locks(ctx, 10000)
				if err != nil {
					t.Fatal(err)
				}
				if sems, rws, err = l.HeldKinds(ctx, locks); err != nil {
					t.Fatal(err)
				}
				sems = slices.DeleteFunc(sems, func(s rowlock.HeldSemaphore) bool { return s.Name != semName })
				rws = slices.DeleteFunc(rws, func(rw rowlock.HeldRWLock) bool { return rw.Name != readName && rw.Name != writeName })
				if !slices.Equal(sems, wantSems) || !slices.Equal(rws, wantRWs) {
					t.Logf("semaphores %+v, want %+v; read/write locks %+v, want %+v", sems, wantSems, rws, wantRWs)
					return false
				}
				return true
			})
		})
	}
}
