package forupdate_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/dblocktest"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestConformance runs dblock's conformance suite on forupdate, on each
// database and, on MariaDB, also drawing tokens MySQL 8.0's way. A lock is
// made lost as a holder whose connection died would find it: the server
// ends the lock's session, which frees the row. Fair and MinHold are
// refused by design, and reentrancy is per Locker. The semaphores and
// read/write locks are checked against dblock.Semaphore's and
// dblock.RWLocker's contracts; new readers wait behind a waiting writer on
// InnoDB only.
func TestConformance(t *testing.T) {
	for _, src := range tokenSources(t) {
		t.Run(src.name, func(t *testing.T) {
			dblocktest.TestLocker(t, dblocktest.Harness{
				New:  func(t *testing.T) dblock.Locker { return src.locker(t, src.target.DB) },
				Lose: func(t *testing.T, k dblock.Lock) { killSession(t, src.target, lockOf(t, k)) },
				Semaphore: func(l dblock.Locker, limit int) (dblock.Semaphore, error) {
					return l.(*forupdate.Locker).Semaphore(limit)
				},
				ReadWrite:    func(l dblock.Locker) dblock.RWLocker { return l.(*forupdate.Locker) },
				WritersFirst: src.target.Dialect == dblock.MySQL,
			})
		})
	}
}

// lockOf is the *forupdate.Lock of a hold: a lock, a read or write hold,
// or a permit's.
func lockOf(t *testing.T, k dblock.Lock) *forupdate.Lock {
	t.Helper()
	switch k := k.(type) {
	case *forupdate.Lock:
		return k
	case *forupdate.Permit:
		return k.Lock
	}
	t.Fatalf("a hold of %T, not a forupdate lock", k)
	return nil
}

// killSession ends the server session of k's transaction and waits until
// the server says it is gone.
func killSession(t *testing.T, tg testdb.Target, k *forupdate.Lock) {
	t.Helper()
	ctx := context.Background()
	idQuery, kill := `SELECT pg_backend_pid()`, `SELECT pg_terminate_backend($1)`
	if tg.Dialect == dblock.MySQL {
		idQuery, kill = `SELECT CONNECTION_ID()`, `KILL CONNECTION %d`
	}
	var id int64
	if err := k.Tx().QueryRowContext(ctx, idQuery).Scan(&id); err != nil {
		t.Fatalf("session of the lock's transaction: %v", err)
	}
	var err error
	if tg.Dialect == dblock.MySQL {
		// KILL takes no placeholder; id is a number the server gave.
		_, err = tg.DB.ExecContext(ctx, fmt.Sprintf(kill, id))
	} else {
		_, err = tg.DB.ExecContext(ctx, kill, id)
	}
	if err != nil {
		t.Fatalf("kill session %d: %v", id, err)
	}
	waitForState(t, tg, id, "gone")
}
