package rowlock_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

// galeraNodes is the Galera cluster of the tests (.ci/galera), migrated.
func galeraNodes(t *testing.T) []testdb.Target {
	t.Helper()
	nodes := testdb.Galera(t)
	if err := migrations.Up(t.Context(), nodes[0].DB); err != nil {
		t.Fatalf("migrations.Up on a Galera node: %v", err)
	}
	testdb.WaitSynced(t, nodes)
	return nodes
}

// TestGaleraOneHolderAcrossNodes: Lockers with their defaults, on the three
// nodes of a Galera cluster, hammer one name; no two ever hold it at once
// and tokens grow with every holder. GET_LOCK is per node: a waiter on one
// node found the session marker of a live holder on another free, judged
// it crashed and cut its lease short (278 overlapping holds a minute were
// seen); on a Galera node the Lockers take no markers, and record none.
func TestGaleraOneHolderAcrossNodes(t *testing.T) {
	if testdb.LeftOut(t, "mysql") {
		return
	}
	nodes := galeraNodes(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // liveness bound
	defer cancel()
	name := testdb.Name(t)
	const perGoroutine = 25
	var (
		holders   atomic.Int32
		overlaps  atomic.Int32
		mu        sync.Mutex
		lastToken int64
		backwards int
		wg        sync.WaitGroup
	)
	for _, node := range nodes {
		l := newLocker(t, node.DB)
		for range 2 {
			wg.Go(func() {
				for range perGoroutine {
					k, err := l.Acquire(ctx, name, dblock.TTL(5*time.Second))
					if err != nil {
						t.Errorf("Acquire on %s: %v", node.Name, err)
						return
					}
					if holders.Add(1) > 1 {
						overlaps.Add(1)
					}
					mu.Lock()
					if k.Token() <= lastToken {
						backwards++
					}
					lastToken = k.Token()
					mu.Unlock()
					time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
					holders.Add(-1)
					if err := k.Release(ctx); err != nil {
						t.Errorf("Release on %s: %v", node.Name, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d acquisitions found another holder in place", n)
	}
	if backwards > 0 {
		t.Errorf("%d holders got a token not above the one before", backwards)
	}
	var keyed int
	if err := nodes[0].DB.QueryRowContext(ctx,
		`SELECT count(*) FROM dblock_locks WHERE name = ? AND session_key <> 0`, name).Scan(&keyed); err != nil {
		t.Fatal(err)
	}
	if keyed > 0 {
		t.Errorf("a hold on a Galera node recorded a session marker, which other nodes cannot judge")
	}
}

// TestGaleraSweepKeepsOtherNodesSessions: the sweep on one node leaves the
// doorbell records of sessions that live on another node (IS_FREE_LOCK
// cannot see them there): it deleted a live session's record of another
// node.
func TestGaleraSweepKeepsOtherNodesSessions(t *testing.T) {
	if testdb.LeftOut(t, "mysql") {
		return
	}
	nodes := galeraNodes(t)
	ctx := t.Context()
	key := rand.Int64N(1<<62) + 1
	conn, err := nodes[0].DB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var got int
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(CONCAT('sqllock.', ?), 0)`, key).Scan(&got); err != nil || got != 1 {
		t.Fatalf("GET_LOCK: %d, %v", got, err)
	}
	defer func() {
		_, _ = conn.ExecContext(context.Background(), `SELECT RELEASE_LOCK(CONCAT('sqllock.', ?))`, key)
	}()
	if _, err := nodes[0].DB.ExecContext(ctx,
		`INSERT INTO dblock_sessions (session_key, bell, started_at) VALUES (?, 0, UTC_TIMESTAMP(6))`, key); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = nodes[0].DB.ExecContext(context.Background(), `DELETE FROM dblock_sessions WHERE session_key = ?`, key)
	}()
	other := nodes[1]
	cfg, err := mysql.ParseDSN(other.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["wsrep_sync_wait"] = "1" // reads wait for what other nodes committed
	synced := testdb.Open(t, other, cfg.FormatDSN())
	l := newLocker(t, synced)
	for after := ""; ; {
		_, next, err := l.Sweep(ctx, 0, 1000, after)
		if err != nil {
			t.Fatal(err)
		}
		if next == "" {
			break
		}
		after = next
	}
	var n int
	if err := synced.QueryRowContext(ctx, `SELECT count(*) FROM dblock_sessions WHERE session_key = ?`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("the sweep on %s deleted the record of a live session on %s", other.Name, nodes[0].Name)
	}
}

// TestGaleraWaiterOnAnotherNodeWaitsForTheHolder: a live holder on one node
// keeps the lock, past several crash graces, from a waiter on another node
// until it releases it. With session markers the waiter found the holder's
// marker free on its own node, cut the holder's lease to the crash grace
// and took the lock while the holder still held it.
func TestGaleraWaiterOnAnotherNodeWaitsForTheHolder(t *testing.T) {
	if testdb.LeftOut(t, "mysql") {
		return
	}
	nodes := galeraNodes(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
	defer cancel()
	name := testdb.Name(t)
	holder, err := newLocker(t, nodes[0].DB).Acquire(ctx, name, dblock.TTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := acquireAsync(ctx, newLocker(t, nodes[1].DB), name)
	time.Sleep(3 * rowlock.DefaultCrashGrace) // long enough for a waiter to judge the holder dead
	select {
	case r := <-got:
		if r.err == nil {
			defer release(t, r.lock)
		}
		t.Fatalf("the waiter on %s returned while the holder on %s held the lock: %v", nodes[1].Name, nodes[0].Name, r.err)
	default:
	}
	if err := holder.Err(); err != nil {
		t.Fatalf("the holder lost its lock while it held it: %v", err)
	}
	release(t, holder)
	r := <-got
	if r.err != nil {
		t.Fatalf("the waiter after the release: %v", r.err)
	}
	release(t, r.lock)
}
