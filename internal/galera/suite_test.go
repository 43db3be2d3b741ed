package galera_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

const (
	// ttl is the workers' lease: short, so that a paused or cut-off
	// holder's lease lapses during the faults and other nodes take over.
	ttl = 3 * time.Second
	// acquireWait bounds one Acquire: a membership change freezes commits
	// for seconds.
	acquireWait = 20 * time.Second
	// semLimit is the semaphore workers' limit.
	semLimit = 2
)

// quiet is the Lockers' logger: the faults make them warn a lot.
var quiet = slog.New(slog.DiscardHandler)

// stats counts what a kind's workers did.
type stats struct {
	holds, errors atomic.Int64
}

// suite is one run of the Galera suite.
type suite struct {
	board  *board
	ledger *ledger
	// names of the resources, each with a ledger row. Each kind has names
	// of its own: fair workers hold a name ahead of every acquirer without
	// Fair() (a lapsed lock with fair waiters goes only to the oldest), so
	// on a shared name the mutex and AcquireAll workers never got a turn.
	mutex, fair, multi1, multi2, rw, sem, fu string
	kinds                                    map[string]*stats
}

func (s *suite) resources() []string {
	out := []string{s.mutex, s.fair, s.multi1, s.multi2, s.rw, s.fu}
	for i := range semLimit {
		out = append(out, slotResource(s.sem, i))
	}
	return out
}

func slotResource(name string, slot int) string { return fmt.Sprintf("%s#slot%d", name, slot) }

// TestGaleraSuite (issue 26's "Done means"): workers of every lock kind that
// Galera supports (rowlock's mutex, Fair, semaphore, read/write and
// AcquireAll on every node; forupdate WithSingleNode on node 1) hold with
// short and long holds and fenced writes to a ledger, while node 3 is
// paused (SIGSTOP) and resumed, node 2 is cut off and let back in, and
// node 3 is SIGKILLed and restarted. It fails on an overlap of live
// holders, a token going backwards, or a lost update.
//
// rowlock before its Galera work (5a8c581) fails it: its waiters judged
// holders on other nodes by their node's GET_LOCK and took their locks.
func TestGaleraSuite(t *testing.T) {
	if testdb.LeftOut(t, "mysql") {
		return
	}
	nodes := testdb.Galera(t)
	ctx := t.Context()
	if err := migrations.Up(ctx, nodes[0].DB); err != nil {
		t.Fatalf("migrations.Up: %v", err)
	}
	if _, err := nodes[0].DB.ExecContext(ctx, ledgerTable); err != nil {
		t.Fatal(err)
	}
	base := testdb.Name(t)
	s := &suite{board: newBoard(), ledger: newLedger(),
		mutex: base + ".m", fair: base + ".f", multi1: base + ".m1", multi2: base + ".m2", rw: base + ".rw", sem: base + ".sem", fu: base + ".fu",
		kinds: map[string]*stats{}}
	for _, k := range []string{"mutex", "fair", "semaphore", "writer", "reader", "all", "forupdate"} {
		s.kinds[k] = new(stats)
	}
	if err := s.ledger.add(ctx, nodes[0].DB, s.resources()...); err != nil {
		t.Fatal(err)
	}
	testdb.WaitSynced(t, nodes)
	// Pools of the test's own: the workers' holds, fenced transactions and
	// forupdate's transactions need more connections than the shared ones.
	dbs := make([]*sql.DB, len(nodes))
	for i, n := range nodes {
		dbs[i] = testdb.Open(t, n, n.DSN)
	}
	node3 := testdb.Node(t, nodes[2])

	work, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for i, n := range nodes {
		l, err := rowlock.New(dbs[i], rowlock.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for _, w := range s.rowlockWorkers(l, dbs[i], n.Name) {
			wg.Go(func() { s.loop(work, w) })
		}
	}
	fl, err := forupdate.New(dbs[0], forupdate.WithSingleNode(), forupdate.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { s.loop(work, s.forupdateWorker(fl, nodes[0].Name)) })

	settle := func() { time.Sleep(2 * time.Second) } // holds change hands between faults
	settle()
	t.Log("pausing", node3.Name)
	node3.Pause(t) // returns once the others go on without it: past 5 s, more than ttl
	node3.Resume(t)
	settle()
	t.Log("isolating", nodes[1].Name)
	testdb.IsolateNode(t, nodes[1]) // returns once the others go on without it: past 5 s, more than ttl
	testdb.RejoinNode(t, nodes[1])
	settle()
	t.Log("killing", node3.Name)
	node3.Kill(t)
	node3.Restart(t) // seconds: the killed node's holds lapse meanwhile
	settle()
	stop()
	wg.Wait()

	for _, v := range s.board.broken() {
		t.Error(v)
	}
	for _, v := range s.ledger.check(ctx, testdb.SyncedDB(t, nodes[0]), s.resources()) {
		t.Error(v)
	}
	for k, st := range s.kinds {
		t.Logf("%s: %d holds, %d failed acquisitions", k, st.holds.Load(), st.errors.Load())
		if st.holds.Load() == 0 {
			t.Errorf("the %s workers never held their lock: the suite tested nothing of them", k)
		}
	}
	t.Logf("ledger: %d fenced commits, %d certification conflicts retried", s.ledger.commits(), s.ledger.conflicts)
	if s.ledger.commits() == 0 {
		t.Error("no fenced write committed")
	}
}

// worker is one goroutine's lock kind: hold takes the lock once, records
// the hold on the board, writes fenced, holds a while and releases.
type worker struct {
	kind string
	hold func(ctx context.Context) error
}

// loop runs w until ctx ends. Failed acquisitions are expected while a
// node is away; they are counted, and tried again.
func (s *suite) loop(ctx context.Context, w worker) {
	for ctx.Err() == nil {
		if err := w.hold(ctx); err != nil {
			s.kinds[w.kind].errors.Add(1)
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		s.kinds[w.kind].holds.Add(1)
	}
}

// holdFor is how long a worker keeps a lock: mostly briefly, sometimes
// for a good part of its lease.
func holdFor() time.Duration {
	if rand.IntN(8) == 0 {
		return time.Duration(500+rand.IntN(1000)) * time.Millisecond
	}
	return time.Duration(rand.IntN(20)) * time.Millisecond
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// fencedHold is a held rowlock hold of any kind.
type fencedHold interface {
	Token() int64
	Err() error
	CheckHeld(ctx context.Context, tx *sql.Tx) error
	Release(ctx context.Context) error
}

// run records h on the board under resources (with their tokens), writes
// (or, shared, reads) fenced, holds, and releases.
func (s *suite) run(ctx context.Context, db *sql.DB, who string, h fencedHold, items []item, shared bool) {
	alive := func() bool { return h.Err() == nil }
	entries := make([]*entry, len(items))
	for i, it := range items {
		entries[i] = &entry{who: who, token: it.token, shared: shared, alive: alive}
		s.board.enter(it.resource, entries[i])
	}
	s.ledger.fence(ctx, db, who, h.CheckHeld, alive, items, shared)
	sleep(ctx, holdFor())
	for i, it := range items {
		s.board.leave(it.resource, entries[i])
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), acquireWait)
	defer cancel()
	_ = h.Release(rctx) // a lost hold's Release fails; the board has already let it go
}

// rowlockWorkers are the rowlock workers of one node.
func (s *suite) rowlockWorkers(l *rowlock.Locker, db *sql.DB, node string) []worker {
	sem, err := l.Semaphore(semLimit)
	if err != nil {
		panic(err)
	}
	who := func(kind string) string { return kind + "@" + node }
	acquire := func(ctx context.Context) (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, acquireWait)
	}
	return []worker{
		{"mutex", func(ctx context.Context) error {
			actx, cancel := acquire(ctx)
			defer cancel()
			k, err := l.Acquire(actx, s.mutex, dblock.TTL(ttl))
			if err != nil {
				return err
			}
			s.run(ctx, db, who("mutex"), k.(*rowlock.Lock), []item{{s.mutex, k.Token()}}, false)
			return nil
		}},
		{"fair", func(ctx context.Context) error {
			actx, cancel := acquire(ctx)
			defer cancel()
			k, err := l.Acquire(actx, s.fair, dblock.TTL(ttl), dblock.Fair())
			if err != nil {
				return err
			}
			s.run(ctx, db, who("fair"), k.(*rowlock.Lock), []item{{s.fair, k.Token()}}, false)
			return nil
		}},
		{"semaphore", func(ctx context.Context) error {
			actx, cancel := acquire(ctx)
			defer cancel()
			k, err := sem.Acquire(actx, s.sem, dblock.TTL(ttl))
			if err != nil {
				return err
			}
			p := k.(*rowlock.Permit)
			if p.Slot() < 0 || p.Slot() >= semLimit {
				s.ledger.violate(fmt.Sprintf("%s got slot %d of a semaphore of %d", who("semaphore"), p.Slot(), semLimit))
			}
			s.run(ctx, db, who("semaphore"), p, []item{{slotResource(s.sem, p.Slot()), p.Token()}}, false)
			return nil
		}},
		{"writer", func(ctx context.Context) error {
			actx, cancel := acquire(ctx)
			defer cancel()
			k, err := l.Writers().Acquire(actx, s.rw, dblock.TTL(ttl))
			if err != nil {
				return err
			}
			s.run(ctx, db, who("writer"), k.(*rowlock.RWLock), []item{{s.rw, k.Token()}}, false)
			return nil
		}},
		{"reader", func(ctx context.Context) error {
			actx, cancel := acquire(ctx)
			defer cancel()
			k, err := l.Readers().Acquire(actx, s.rw, dblock.TTL(ttl))
			if err != nil {
				return err
			}
			s.run(ctx, db, who("reader"), k.(*rowlock.RWLock), []item{{s.rw, k.Token()}}, true)
			return nil
		}},
		{"all", func(ctx context.Context) error {
			actx, cancel := acquire(ctx)
			defer cancel()
			m, err := l.AcquireAll(actx, []string{s.multi1, s.multi2}, dblock.TTL(ttl))
			if err != nil {
				return err
			}
			var items []item
			for i, n := range m.Names() {
				items = append(items, item{n, m.Tokens()[i]})
			}
			s.run(ctx, db, who("all"), m, items, false)
			return nil
		}},
	}
}

// forupdateWorker holds forupdate's lock on one node (WithSingleNode: all
// its traffic goes there), writing the ledger in the lock's transaction,
// which its Release commits.
func (s *suite) forupdateWorker(l *forupdate.Locker, node string) worker {
	who := "forupdate@" + node
	return worker{"forupdate", func(ctx context.Context) error {
		actx, cancel := context.WithTimeout(ctx, acquireWait)
		defer cancel()
		k, err := l.Acquire(actx, s.fu, dblock.TTL(ttl))
		if err != nil {
			return err
		}
		h := k.(*forupdate.Lock)
		e := &entry{who: who, token: h.Token(), alive: func() bool { return h.Err() == nil }}
		s.board.enter(s.fu, e)
		items := []item{{s.fu, h.Token()}}
		werr := s.ledger.apply(ctx, h.Tx(), who, items, false)
		sleep(ctx, holdFor())
		s.board.leave(s.fu, e)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), acquireWait)
		defer cancel()
		if werr != nil {
			_ = h.Rollback(rctx)
			return nil
		}
		s.ledger.settle(items, h.Release(rctx))
		return nil
	}}
}
