package rowlock_test

import (
	"database/sql"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/dblocktest"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestConformance runs dblock's conformance suite on rowlock, on each
// database, SQLite included. A lock is made lost as a holder that stopped renewing would
// find it: its lease ended by the database clock.
func TestConformance(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			dblocktest.TestLocker(t, dblocktest.Harness{
				New:  func(t *testing.T) dblock.Locker { return newLocker(t, tg.DB) },
				Lose: func(t *testing.T, k dblock.Lock) { expireNow(t, tg, k.Name()) },
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
			})
		})
	}
}
