package failover_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// The failover suite's leases. Holders hold for up to maxHold, so that
// many are mid-hold when the primary dies; the pause (P) is shorter than
// the TTL: holders then believe in a lease for at most P (rowlock's
// Failover section) and renew or ping every P/3.
// The default TTL, long beside the failover (one to five seconds from the
// kill to the promotion on a loaded machine), as in production: without
// the pause, a holder renews (every TTL/3) or pings (forupdate) only after
// others have taken its lock on the promoted server. Holds last up to
// maxHold.
const (
	suiteTTL     = dblock.DefaultTTL
	maxHold      = suiteTTL
	suitePause   = 2 * time.Second
	suiteFUPause = 2 * time.Second
)

// Phases of one failover: the workers run this long on the primary
// before the cut, between the cut and the kill (async: commits that are
// lost), and after the promotion beyond the pause (takes on the new
// primary).
const (
	warmUp    = time.Second
	unsynced  = 2 * time.Second
	afterward = 2 * time.Second
)

// hold is one holder's belief: from when its acquisition returned until
// it called Release or saw Done closed, by this process's monotonic
// clock, which every worker shares.
type hold struct {
	kind, worker string
	// keys are what the hold excludes others from (names), with its token
	// for each (slot keys for a semaphore); shared: a reader or a permit,
	// which may overlap others up to limit (0: any number of readers).
	keys   map[string]int64
	names  []string
	shared bool
	limit  int
	start  time.Time
	end    time.Time
	// fenced: the ledger write made under the hold was acknowledged.
	fenced bool
}

// suiteKind is one kind of lock as the failover suite's workers take it.
type suiteKind struct {
	name string
	// newTake returns the kind's take on a Locker over db.
	newTake func(t testing.TB, db *sql.DB) suiteTake
}

// suiteTake acquires name (waiting at most ctx), and returns the lock and
// how the hold is to be recorded.
type suiteTake func(ctx context.Context, name string) (dblock.Lock, hold, error)

func unmarked(t testing.TB, db *sql.DB) *rowlock.Locker {
	return newRowlock(t, db, rowlock.WithCrashGrace(0), rowlock.WithFailoverPause(suitePause)).(*rowlock.Locker)
}

var suiteKinds = []suiteKind{
	{"mutex", func(t testing.TB, db *sql.DB) suiteTake {
		l := unmarked(t, db)
		return func(ctx context.Context, name string) (dblock.Lock, hold, error) {
			k, err := l.Acquire(ctx, name, dblock.TTL(suiteTTL))
			if err != nil {
				return nil, hold{}, err
			}
			return k, hold{keys: map[string]int64{name: k.Token()}, names: []string{name}}, nil
		}
	}},
	{"fair", func(t testing.TB, db *sql.DB) suiteTake {
		l := unmarked(t, db)
		return func(ctx context.Context, name string) (dblock.Lock, hold, error) {
			k, err := l.Acquire(ctx, name, dblock.TTL(suiteTTL), dblock.Fair())
			if err != nil {
				return nil, hold{}, err
			}
			return k, hold{keys: map[string]int64{name: k.Token()}, names: []string{name}}, nil
		}
	}},
	{"semaphore", func(t testing.TB, db *sql.DB) suiteTake {
		s, err := unmarked(t, db).Semaphore(2)
		if err != nil {
			t.Fatal(err)
		}
		return func(ctx context.Context, name string) (dblock.Lock, hold, error) {
			k, err := s.Acquire(ctx, name, dblock.TTL(suiteTTL))
			if err != nil {
				return nil, hold{}, err
			}
			slot := fmt.Sprintf("%s slot %d", name, k.(*rowlock.Permit).Slot())
			return k, hold{keys: map[string]int64{slot: k.Token()}, names: []string{name, slot}, shared: true, limit: 2}, nil
		}
	}},
	{"rw", func(t testing.TB, db *sql.DB) suiteTake {
		l := unmarked(t, db)
		return func(ctx context.Context, name string) (dblock.Lock, hold, error) {
			if rand.IntN(2) == 0 {
				k, err := l.Readers().Acquire(ctx, name, dblock.TTL(suiteTTL))
				if err != nil {
					return nil, hold{}, err
				}
				return k, hold{names: []string{name}, shared: true}, nil
			}
			k, err := l.Writers().Acquire(ctx, name, dblock.TTL(suiteTTL))
			if err != nil {
				return nil, hold{}, err
			}
			return k, hold{keys: map[string]int64{name: k.Token()}, names: []string{name}}, nil
		}
	}},
	{"all", func(t testing.TB, db *sql.DB) suiteTake {
		l := unmarked(t, db)
		return func(ctx context.Context, name string) (dblock.Lock, hold, error) {
			names := []string{name, name + "/2"}
			m, err := l.AcquireAll(ctx, names, dblock.TTL(suiteTTL))
			if err != nil {
				return nil, hold{}, err
			}
			h := hold{keys: map[string]int64{}, names: names}
			for i, n := range m.Names() {
				h.keys[n] = m.Tokens()[i]
			}
			return m, h, nil
		}
	}},
	{"forupdate", func(t testing.TB, db *sql.DB) suiteTake {
		l, err := forupdate.New(db, forupdate.WithFailoverPause(suiteFUPause))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return func(ctx context.Context, name string) (dblock.Lock, hold, error) {
			k, err := l.Acquire(ctx, name, dblock.TTL(suiteTTL))
			if err != nil {
				return nil, hold{}, err
			}
			return k, hold{keys: map[string]int64{name: k.Token()}, names: []string{name}}, nil
		}
	}},
}

// Workers per kind, and names per kind they share.
const (
	workersEach = 3
	namesEach   = 2
)

// failovers is how many failovers each mode of TestFailoverSuite runs:
// one in CI; SQLLOCK_FAILOVERS asks for more (the longer run of
// docs/failover.md).
func failovers(t *testing.T) int {
	v := os.Getenv("SQLLOCK_FAILOVERS")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("SQLLOCK_FAILOVERS=%q: want a positive number", v)
	}
	return n
}

// TestFailoverSuite: unplanned failovers (issue 25), with asynchronous and
// with synchronous replication. Workers of every kind of lock (rowlock
// without session markers: mutex, Fair, semaphore, read/write, AcquireAll;
// forupdate) take and release a few names through a pool on both servers
// (target_session_attrs=read-write), holding each lock for up to its TTL
// and writing, fenced, a ledger row under each hold. Then the WAL stops
// reaching the standby, the workers go on (async: their commits are
// acknowledged and lost; sync: they wait), the primary is killed, the
// standby promoted, and the workers go on there past the failover pause.
// The test fails on any two live holders at once (by the holders' own
// monotonic clock: from Acquire's return to Release's call or Done's
// closing), any token repeated or going backwards for a name (in the
// order the holds began), and, with synchronous replication, any
// acknowledged ledger write missing on the promoted server.
func TestFailoverSuite(t *testing.T) {
	if testdb.LeftOut(t, "postgres") {
		return
	}
	n := failovers(t)
	for _, mode := range []struct {
		name string
		opts []testdb.ReplicatedOption
	}{{"async", nil}, {"sync", []testdb.ReplicatedOption{testdb.Synchronous()}}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			for i := range n {
				t.Run(strconv.Itoa(i), func(t *testing.T) { oneFailover(t, mode.name == "sync", mode.opts) })
			}
		})
	}
}

// oneFailover runs the suite's workers across one unplanned failover.
func oneFailover(t *testing.T, synchronous bool, opts []testdb.ReplicatedOption) {
	ctx := t.Context()
	r := testdb.NewReplicated(t, opts...)
	db := testdb.Open(t, r.Target, r.Target.DSN)
	if _, err := db.ExecContext(ctx, `CREATE TABLE suite_ledger (kind text, name text, token bigint, worker text)`); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var holds []hold
	stop := make(chan struct{})
	var cut atomic.Bool
	cutCh := make(chan struct{})
	var wg sync.WaitGroup
	// work runs a worker: it takes one of names() after the other with
	// take, until stop.
	work := func(kind, worker string, dbw *sql.DB, take suiteTake, names func() []string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ns := names()
				// A hold begun before the cut ends there: its name's row
				// reached the standby, with a lease that outlives the
				// failover, so nobody could take it there anyway.
				var ends <-chan struct{} = stop
				if !cut.Load() {
					ends = either(stop, cutCh)
				}
				h, ok := holdOnce(ctx, dbw, take, kind, worker, ns[rand.IntN(len(ns))], ends)
				if !ok {
					time.Sleep(20 * time.Millisecond) // a failed call during the failover
					continue
				}
				mu.Lock()
				holds = append(holds, h)
				mu.Unlock()
			}
		}()
	}
	// Names taken before the cut, and fresh ones taken after it, whose
	// rows never reach the standby: on the promoted server they are free
	// at once, while holders of the old primary may still hold them.
	afterNames := map[string][]string{}
	for _, kd := range suiteKinds {
		take := kd.newTake(t, db)
		var before, after []string
		for range namesEach {
			before, after = append(before, testdb.Name(t)), append(after, testdb.Name(t))
		}
		afterNames[kd.name] = after
		for w := range workersEach {
			work(kd.name, fmt.Sprintf("%s/%d", kd.name, w), db, take, func() []string {
				if cut.Load() {
					return after
				}
				return before
			})
		}
	}
	sleepOr(warmUp, ctx)
	r.CutReplication(t)
	cut.Store(true)
	close(cutCh)
	sleepOr(unsynced, ctx)
	if !synchronous {
		if lost := r.Unreplicated(t); lost <= 0 {
			t.Errorf("nothing was committed after the cut: the failover loses nothing")
		}
	}
	r.KillPrimary(t)
	crashed := time.Now()
	r.Promote(t)
	promoted := time.Now()
	// Newcomers, as a process started after the failover is: Lockers of
	// their own, on a pool of their own, taking the names at once (the
	// workers' waits may take a while to come back from the crash).
	newcomers := testdb.Open(t, r.Target, r.Target.DSN)
	for _, kd := range suiteKinds {
		take := kd.newTake(t, newcomers)
		for w := range namesEach {
			work(kd.name, fmt.Sprintf("%s/newcomer-%d", kd.name, w), newcomers, take, func() []string { return afterNames[kd.name] })
		}
	}
	sleepOr(max(suitePause, suiteFUPause)+afterward, ctx)
	close(stop)
	wg.Wait()

	fresh := testdb.Open(t, r.Target, r.Target.DSN)
	checkHolds(t, holds, crashed, promoted)
	if synchronous {
		checkLedger(t, fresh, holds)
	}
}

// holdOnce takes name, writes its ledger row fenced, holds it for up to
// maxHold (or until it is lost or stop), and releases it. ok is false
// when the take failed.
func holdOnce(ctx context.Context, db *sql.DB, take suiteTake, kind, worker, name string, stop <-chan struct{}) (h hold, ok bool) {
	waitCtx, cancel := context.WithTimeout(ctx, bound)
	k, h, err := take(waitCtx, name)
	cancel()
	if err != nil {
		return hold{}, false
	}
	h.kind, h.worker = kind, worker
	h.start = time.Now()
	h.fenced = fencedWrite(ctx, db, k, h)
	timer := time.NewTimer(time.Duration(rand.Int64N(int64(maxHold))))
	defer timer.Stop()
	select {
	case <-k.Done():
	case <-timer.C:
	case <-stop:
	}
	h.end = time.Now()
	// A lost lock is released too: that ends a forupdate lock's
	// transaction.
	if err := k.Release(context.Background()); err != nil {
		// The holder stops working now all the same.
		<-k.Done()
		if _, ok := k.(*forupdate.Lock); ok {
			h.fenced = false // its ledger row was in the lock's transaction
		}
	}
	return h, true
}

// fencedWrite writes h's ledger rows under k, proved held in the same
// transaction (forupdate: in the lock's own, which Release commits).
func fencedWrite(ctx context.Context, db *sql.DB, k dblock.Lock, h hold) bool {
	insert := func(q interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}) error {
		for key, token := range h.keys {
			if _, err := q.ExecContext(ctx, `INSERT INTO suite_ledger VALUES ($1, $2, $3, $4)`, h.kind, key, token, h.worker); err != nil {
				return err
			}
		}
		return nil
	}
	if fk, ok := k.(*forupdate.Lock); ok {
		return insert(fk.Tx()) == nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false
	}
	defer func() { _ = tx.Rollback() }()
	if err := dblock.CheckHeld(ctx, k, tx); err != nil {
		return false
	}
	return insert(tx) == nil && tx.Commit() == nil
}

// either is closed once a or b is.
func either(a, b <-chan struct{}) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		defer close(c)
		select {
		case <-a:
		case <-b:
		}
	}()
	return c
}

// sleepOr sleeps d, or until ctx ends.
func sleepOr(d time.Duration, ctx context.Context) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// checkHolds fails the test on two live holders of a name at once (a
// writer or mutex with anyone; more permits than the limit), and on a
// token that does not grow, per key, in the order the holds began. It
// also fails when no kind held anything after the promotion: then the
// suite checked nothing there.
func checkHolds(t *testing.T, holds []hold, crashed, promoted time.Time) {
	t.Helper()
	byName := map[string][]hold{}
	for _, h := range holds {
		for _, n := range h.names {
			byName[n] = append(byName[n], h)
		}
	}
	var overlaps []error
	for name, hs := range byName {
		for i, a := range hs {
			for _, b := range hs[i+1:] {
				if !a.start.Before(b.end) || !b.start.Before(a.end) {
					continue
				}
				if a.shared && b.shared && (a.limit == 0 || !slotOf(name, a, b)) {
					continue // readers together, or permits of different slots
				}
				overlaps = append(overlaps, fmt.Errorf("%s: %s (%v) and %s (%v) held at once for %v (crash at +%v, promotion at +%v)",
					name, a.worker, a.keys, b.worker, b.keys, minTime(a.end, b.end).Sub(maxTime(a.start, b.start)),
					crashed.Sub(a.start).Round(time.Millisecond), promoted.Sub(a.start).Round(time.Millisecond)))
			}
		}
	}
	for _, err := range overlaps {
		t.Error(err)
	}
	last := map[string]int64{}
	ordered := append([]hold(nil), holds...)
	sortByStart(ordered)
	after := map[string]int{}
	for _, h := range ordered {
		if h.start.After(promoted) {
			after[h.kind]++
		}
		for key, token := range h.keys {
			if token <= last[key] {
				t.Errorf("%s: %s got token %d after token %d", key, h.worker, token, last[key])
			}
			last[key] = max(last[key], token)
		}
	}
	for _, kd := range suiteKinds {
		if after[kd.name] == 0 {
			t.Errorf("%s: no hold began after the promotion", kd.name)
		}
	}
	across := map[string]int{}
	for _, h := range holds {
		if h.start.Before(crashed) && h.end.After(promoted) {
			across[h.kind]++
		}
		if testing.Verbose() && h.end.After(crashed) {
			t.Logf("%s %s %v: from %v to %v after the crash (promotion at %v)", h.kind, h.worker, h.keys,
				h.start.Sub(crashed).Round(time.Millisecond), h.end.Sub(crashed).Round(time.Millisecond), promoted.Sub(crashed).Round(time.Millisecond))
		}
	}
	t.Logf("%d holds, %d overlaps; holds begun after the promotion: %v; believed from before the crash to after the promotion: %v",
		len(holds), len(overlaps), after, across)
}

// slotOf reports whether name is a semaphore slot key both holds have.
func slotOf(name string, a, b hold) bool {
	_, inA := a.keys[name]
	_, inB := b.keys[name]
	return inA && inB
}

// checkLedger fails the test when a ledger row acknowledged under a hold
// is missing on the promoted server.
func checkLedger(t *testing.T, db *sql.DB, holds []hold) {
	t.Helper()
	missing := 0
	for _, h := range holds {
		if !h.fenced {
			continue
		}
		for key, token := range h.keys {
			var n int
			err := db.QueryRowContext(context.Background(),
				`SELECT count(*) FROM suite_ledger WHERE name = $1 AND token = $2 AND worker = $3`, key, token, h.worker).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				missing++
				t.Errorf("%s: the acknowledged ledger row of %s, token %d, is missing on the promoted server", key, h.worker, token)
			}
		}
	}
	if missing > 0 {
		var rows, maxToken int64
		var server string
		_ = db.QueryRowContext(context.Background(), `SELECT count(*), COALESCE(max(token), 0), inet_server_port()::text || ' ' || pg_walfile_name(pg_current_wal_lsn()) FROM suite_ledger`).Scan(&rows, &maxToken, &server)
		t.Errorf("%d acknowledged fenced writes lost with synchronous replication (the ledger has %d rows, up to token %d, on %s)", missing, rows, maxToken, server)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// sortByStart orders holds by when they began.
func sortByStart(hs []hold) {
	slices.SortFunc(hs, func(a, b hold) int { return a.start.Compare(b.start) })
}
