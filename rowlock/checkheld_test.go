package rowlock_test

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestCheckHeldContention: a fenced write's transaction that meets real
// contention on the lock row (MySQL: a lock wait timeout; PostgreSQL: it is
// chosen as a deadlock's victim) learns that the hold could not be proven,
// as dblock.ErrLockLost, never as the driver's contention error. CheckHeld
// must not retry: the contention may have aborted the transaction.
func TestCheckHeldContention(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			var db *sql.DB
			if tg.Dialect == dblock.MySQL {
				db = isolated(t, tg, map[string]string{"innodb_lock_wait_timeout": "1"}).DB
			} else {
				db = tg.DB
			}
			l := newLocker(t, db)
			name := testdb.Name(t)
			k := mustTry(t, l, name)
			defer func() { _ = k.Release(context.Background()) }()
			fencer := k.(dblock.Fencer)

			blocker, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = blocker.Rollback() }()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()

			var checked error
			if tg.Dialect == dblock.MySQL {
				mustExec(t, blocker, `SELECT 1 FROM dblock_locks WHERE name = ? FOR UPDATE`, name)
				checked = fencer.CheckHeld(ctx, tx) // waits for the row, gives up after 1 s
			} else {
				checked = pgDeadlockedCheck(t, fencer, tx, blocker, name)
			}
			noContention(t, "CheckHeld", checked)
			if !errors.Is(checked, dblock.ErrLockLost) {
				t.Fatalf("CheckHeld that met contention = %v, want ErrLockLost", checked)
			}
		})
	}
}

// pgDeadlockedCheck makes tx, running CheckHeld, the victim of a deadlock:
// tx holds an advisory lock and waits for the lock row, which blocker holds
// and then waits for the advisory lock. tx waited first and checks for
// deadlocks after 5 s, blocker only after a minute, so tx is the one
// PostgreSQL aborts.
func pgDeadlockedCheck(t *testing.T, fencer dblock.Fencer, tx, blocker *sql.Tx, name string) error {
	t.Helper()
	ctx := t.Context()
	key := rand.Int64()
	var pid int
	if err := tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	mustExec(t, tx, `SET LOCAL deadlock_timeout = '5s'`)
	mustExec(t, tx, `SELECT pg_advisory_xact_lock($1)`, key)
	mustExec(t, blocker, `SET LOCAL deadlock_timeout = '1min'`)
	mustExec(t, blocker, `SELECT 1 FROM dblock_locks WHERE name = $1 FOR UPDATE`, name)
	checked := make(chan error, 1)
	go func() { checked <- fencer.CheckHeld(ctx, tx) }()
	waitPidBlocked(t, pid)
	closed := make(chan error, 1)
	go func() {
		// Blocks until tx is aborted.
		_, err := blocker.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, key)
		closed <- err
	}()
	err := <-checked
	if err := <-closed; err != nil {
		t.Fatalf("blocker: %v", err)
	}
	return err
}

// waitPidBlocked polls (bounded) until PostgreSQL backend pid waits for a
// lock.
func waitPidBlocked(t *testing.T, pid int) {
	t.Helper()
	for range 1000 {
		var n int
		err := testdb.Targets(t)[0].DB.QueryRowContext(t.Context(),
			`SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, pid).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		sleepBriefly()
	}
	t.Fatalf("backend %d never waited for a lock", pid)
}

func mustExec(t testing.TB, tx *sql.Tx, query string, args ...any) {
	t.Helper()
	if _, err := tx.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// TestRefusedCheckHeldClosesDone: a CheckHeld that finds the hold gone (its
// lease lapsed and another holder took the lock over) is a definite answer
// from the lock's database: Done closes then, not at the next renewal, and
// Err says the lock was lost.
func TestRefusedCheckHeldClosesDone(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			name := testdb.Name(t)
			k := mustTry(t, newLocker(t, tg.DB), name)
			defer func() { _ = k.Release(context.Background()) }()
			expireNow(t, tg, name)
			other := mustTry(t, newLocker(t, tg.DB), name)
			defer release(t, other)
			tx, err := tg.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if err := k.(dblock.Fencer).CheckHeld(ctx, tx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("CheckHeld after a takeover = %v, want ErrLockLost", err)
			}
			select {
			case <-k.Done():
			default:
				t.Fatal("Done still open after CheckHeld found the hold taken over")
			}
			if !errors.Is(k.Err(), dblock.ErrLockLost) {
				t.Fatalf("Err = %v, want ErrLockLost", k.Err())
			}
		})
	}
}
