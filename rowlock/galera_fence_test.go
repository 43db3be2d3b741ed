package rowlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestGaleraFencedWriteLosesToTakeover: a holder on node 1 proves its hold
// with CheckHeld in an open transaction and writes in it; meanwhile its
// lease lapses (its renewals wait for that transaction's row lock on node
// 1) and a contender on node 2, where node 1's row lock does not exist,
// takes the lock over. The fenced transaction must then fail to commit,
// with an error IsConflict reports: its write would land after the lock
// changed hands. With a CheckHeld that only locked the row in shared mode
// (each node's own), tx committed in some runs: when it committed before
// node 1 applied the takeover, its write set had no key in common with the
// takeover's. In other runs node 1 applied the takeover first and aborted
// tx for its shared lock. TestGaleraCheckHeldWritesTheRow checks the write
// that closes the window, deterministically.
func TestGaleraFencedWriteLosesToTakeover(t *testing.T) {
	if testdb.LeftOut(t, "mysql") {
		return
	}
	nodes := galeraNodes(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
	defer cancel()
	name := testdb.Name(t)
	if _, err := nodes[0].DB.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS galera_fenced
		(name VARCHAR(255) NOT NULL, token BIGINT NOT NULL, PRIMARY KEY (name, token)) ENGINE=InnoDB`); err != nil {
		t.Fatal(err)
	}
	holder, err := newLocker(t, nodes[0].DB).Acquire(ctx, name, dblock.TTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := nodes[0].DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := holder.(*rowlock.Lock).CheckHeld(ctx, tx); err != nil {
		t.Fatalf("CheckHeld of a fresh hold: %v", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO galera_fenced (name, token) VALUES (?, ?)`, name, holder.Token()); err != nil {
		t.Fatal(err)
	}
	contender, err := newLocker(t, nodes[1].DB).Acquire(ctx, name, dblock.TTL(30*time.Second))
	if err != nil {
		t.Fatalf("the contender on %s: %v", nodes[1].Name, err)
	}
	defer release(t, contender)
	if contender.Token() <= holder.Token() {
		t.Fatalf("the contender's token %d is not above the holder's %d", contender.Token(), holder.Token())
	}
	err = tx.Commit()
	if err == nil {
		t.Fatalf("the fenced transaction of token %d committed after %s took the lock over with token %d",
			holder.Token(), nodes[1].Name, contender.Token())
	}
	if !rowlock.IsConflict(err) {
		t.Fatalf("the fenced transaction's COMMIT: %v; want an error IsConflict reports (1213)", err)
	}
	var n int
	synced := testdb.SyncedDB(t, nodes[2])
	if err := synced.QueryRowContext(ctx, `SELECT count(*) FROM galera_fenced WHERE name = ?`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d fenced rows of the old holder are in the table", n)
	}
	if err := holder.Err(); !errors.Is(err, dblock.ErrLockLost) {
		t.Fatalf("the old holder's Err = %v, want ErrLockLost", err)
	}
}

// TestGaleraCheckHeldWritesTheRow: on a Galera node a fenced transaction
// carries the lock's row in its write set: each committed CheckHeld raises
// fence_writes by one, and a rolled-back one changes nothing. Certification
// orders such a transaction against a takeover of the lock on another node
// only through that write: a CheckHeld that only locked the row in shared
// mode fails this test. (On a single server CheckHeld only reads, as the
// CheckHeld tests over every dialect show; this test leaves the shared
// servers alone.)
func TestGaleraCheckHeldWritesTheRow(t *testing.T) {
	if testdb.LeftOut(t, "mysql") {
		return
	}
	nodes := galeraNodes(t)
	ctx := t.Context()
	name := testdb.Name(t)
	k, err := newLocker(t, nodes[0].DB).Acquire(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, k)
	for _, commit := range []bool{true, false, true} {
		tx, err := nodes[0].DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := k.(*rowlock.Lock).CheckHeld(ctx, tx); err != nil {
			_ = tx.Rollback()
			t.Fatalf("CheckHeld: %v", err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var writes int64
	err = testdb.SyncedDB(t, nodes[1]).QueryRowContext(ctx, `SELECT fence_writes FROM dblock_locks WHERE name = ?`, name).Scan(&writes)
	if err != nil {
		t.Fatal(err)
	}
	if writes != 2 {
		t.Fatalf("fence_writes = %d on %s after two committed fenced transactions on %s and a rolled-back one, want 2",
			writes, nodes[1].Name, nodes[0].Name)
	}
}
