package rowlock_test

import (
	"context"
	"database/sql"
	"strconv"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/dblocktest"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestConformance runs dblock's conformance suite on rowlock, on each
// database, SQLite included, with the lock kinds where the database has
// them. A lock is made lost as a holder that stopped renewing would find
// it, its lease ended by the database clock: by Locker.Revoke, as a user's
// harness would, never by writing to the lock table.
func TestConformance(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			h := dblocktest.Harness{
				New:  func(t *testing.T) dblock.Locker { return newLocker(t, tg.DB) },
				Lose: func(t *testing.T, k dblock.Lock) { loseByRevoke(t, tg.DB, k) },
				Tx: func(t *testing.T) *sql.Tx {
					tx, err := tg.DB.BeginTx(t.Context(), nil)
					if err != nil {
						t.Fatalf("begin: %v", err)
					}
					return tx
				},
				Fair:                   true,
				MinHold:                true,
				ReentrantAcrossLockers: true,
			}
			if tg.Dialect != dblock.SQLite { // no lock kinds on SQLite
				h.Semaphore = func(l dblock.Locker, limit int) (dblock.Semaphore, error) {
					return l.(*rowlock.Locker).Semaphore(limit)
				}
				h.ReadWrite = func(l dblock.Locker) dblock.RWLocker { return l.(*rowlock.Locker) }
				h.WritersFirst = true
				h.Multi = func(l dblock.Locker) (dblocktest.MultiFunc, dblocktest.MultiFunc) {
					r := l.(*rowlock.Locker)
					return dblocktest.MultiOf(r.AcquireAll), dblocktest.MultiOf(r.TryAcquireAll)
				}
			}
			dblocktest.TestLocker(t, h)
		})
	}
}

// loseByRevoke ends the leases of k's rows with Locker.Revoke (on a
// Locker of its own: an operator's, say).
func loseByRevoke(t *testing.T, db *sql.DB, k dblock.Lock) {
	t.Helper()
	var rows []string
	switch k := k.(type) {
	case *rowlock.Permit:
		rows = []string{k.Name() + lockinput.KindSeparator + "s" + strconv.Itoa(k.Slot())}
	case *rowlock.RWLock:
		rows = []string{k.Name() + lockinput.KindSeparator + "w"}
		if !k.Exclusive() {
			for i := range rowlock.MaxReaders {
				rows = append(rows, k.Name()+lockinput.KindSeparator+"r"+strconv.Itoa(i))
			}
		}
	case *rowlock.MultiLock:
		rows = k.Names()
	default:
		rows = []string{k.Name()}
	}
	l := newLocker(t, db)
	revoked := false
	for _, row := range rows {
		ok, err := l.Revoke(context.Background(), row)
		if err != nil {
			t.Fatalf("Revoke(%q): %v", row, err)
		}
		revoked = revoked || ok
	}
	if !revoked {
		t.Fatalf("Revoke of %q's rows found none taken", k.Name())
	}
}
