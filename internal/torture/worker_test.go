package torture_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/clock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/internal/tuning"
	"github.com/sqllock/sqllock/rowlock"
)

// Environment of a worker process, set by startWorker. The clock offset
// travels in clock.OffsetEnv, which only package clock reads.
const (
	envDialect  = "SQLLOCK_TORTURE_DIALECT"
	envDSN      = "SQLLOCK_TORTURE_DSN"       // through the fault-injection proxy: the lockers' pool
	envClockDSN = "SQLLOCK_TORTURE_CLOCK_DSN" // straight to the server: reading the database clock
	envLedger   = "SQLLOCK_TORTURE_LEDGER"
	envNames    = "SQLLOCK_TORTURE_NAMES"
	envRunFor   = "SQLLOCK_TORTURE_RUN_FOR" // a Go duration
	// envSessionDSN, when set, gives rowlock.WithSessionDB a pool of its
	// own: a direct connection beside a lock pool that goes through a
	// pooler.
	envSessionDSN = "SQLLOCK_TORTURE_SESSION_DSN"
	envPerWorker  = "SQLLOCK_TORTURE_GOROUTINES" // goroutines taking locks
	envProfile    = "SQLLOCK_TORTURE_PROFILE"    // how long holds last: see holdFor
)

// TestTortureWorker is a worker process: SQLLOCK_TORTURE_GOROUTINES
// goroutines acquire the names in SQLLOCK_TORTURE_NAMES for
// SQLLOCK_TORTURE_RUN_FOR (and until the process has recorded a hold),
// writing each hold to the ledger. It then closes everything it opened and
// fails if a goroutine is left. In a normal run it returns at once.
func TestTortureWorker(t *testing.T) {
	if !testdb.IsChild() || os.Getenv(envDSN) == "" {
		return
	}
	leaks := goleak.IgnoreCurrent()
	// Last, once the pools testdb.Open made have closed and pgx's
	// connections with them: a connection closed as a query's context
	// ended lingers in a goroutine of pgx's for up to 15 s (a cancel
	// request, then waiting for the server or PgBouncer to hang up).
	t.Cleanup(func() {
		if err := goleak.Find(leaks); err != nil {
			t.Errorf("worker leaked goroutines: %v", err)
		}
	})
	dialect, err := lockkit.ParseDialect(os.Getenv(envDialect))
	if err != nil {
		t.Fatal(err)
	}
	runFor, err := time.ParseDuration(os.Getenv(envRunFor))
	if err != nil {
		t.Fatal(err)
	}
	goroutines, err := strconv.Atoi(os.Getenv(envPerWorker))
	if err != nil || goroutines <= 0 {
		t.Fatalf("%s=%q: want a positive number", envPerWorker, os.Getenv(envPerWorker))
	}
	profile := holdProfile(os.Getenv(envProfile))
	if _, ok := holdProfiles[profile]; !ok {
		t.Fatalf("%s=%q: unknown hold profile", envProfile, profile)
	}
	tg := testdb.Target{Name: os.Getenv(envDialect), Dialect: dialect,
		DriverName: map[dblock.Dialect]string{dblock.Postgres: "pgx", dblock.MySQL: "mysql"}[dialect]}
	lockDB := testdb.Open(t, tg, os.Getenv(envDSN))
	clockDB := testdb.Open(t, tg, os.Getenv(envClockDSN))
	led, err := openLedger(os.Getenv(envLedger))
	if err != nil {
		t.Fatal(err)
	}
	w := &holder{dialect: dialect, clockDB: clockDB, led: led, pid: os.Getpid(), profile: profile}
	rlOpts := []rowlock.Option{
		rowlock.WithWaiterTTL(tortureTTL),
		tuning.PollInterval(5*time.Millisecond, 200*time.Millisecond).(rowlock.Option),
		rowlock.WithLogger(slog.New(&eventHandler{w: w, next: slog.NewTextHandler(os.Stderr, nil)})),
	}
	if dsn := os.Getenv(envSessionDSN); dsn != "" {
		rlOpts = append(rlOpts, rowlock.WithSessionDB(testdb.Open(t, tg, dsn)))
	}
	if w.rl, err = rowlock.New(lockDB, rlOpts...); err != nil {
		t.Fatal(err)
	}
	if w.fl, err = forupdate.New(lockDB); err != nil {
		t.Fatal(err)
	}
	if w.sem, err = w.rl.Semaphore(semLimit); err != nil {
		t.Fatal(err)
	}
	if w.fsem, err = w.fl.Semaphore(semLimit); err != nil {
		t.Fatal(err)
	}
	rl, fl := w.rl, w.fl

	// The skew as the library sees it: its wall clock against the database's.
	dbStart, err := w.dbNowRetry(clockDB)
	if err != nil {
		t.Fatalf("reading the database clock: %v", err)
	}
	skew := clock.Now().Round(0).Sub(time.UnixMicro(dbStart)).Round(time.Second)
	fmt.Printf("worker up pid=%d offset=%v skew=%v\n", w.pid, clock.Offset(), skew)

	// The run ends after runFor, but not before this process recorded a
	// hold (a late replacement of a killed worker), and at the latest a
	// minute after: a worker that cannot get any lock that long fails.
	ctx, cancel := context.WithTimeout(context.Background(), runFor+time.Minute)
	defer cancel()
	deadline := time.Now().Add(runFor)
	names := strings.Split(os.Getenv(envNames), ",")
	for _, name := range names {
		if kindOf(name) == kindMulti {
			w.multiNames = append(w.multiNames, name)
		}
	}
	stallCtx, stopStalls := context.WithCancel(ctx)
	var stallWatching sync.WaitGroup
	stallWatching.Go(func() { w.stalls.run(stallCtx) })
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for ctx.Err() == nil && (time.Now().Before(deadline) || w.holds.Load() == 0) {
				w.hold(ctx, w.pick(names))
			}
		})
	}
	wg.Wait()
	stopStalls()
	stallWatching.Wait()

	// Everything the worker opened is closed (the pools as the test ends),
	// and nothing is left running (checked last, see above).
	if err := rl.Close(); err != nil {
		t.Errorf("rowlock Close: %v", err)
	}
	if err := fl.Close(); err != nil {
		t.Errorf("forupdate Close: %v", err)
	}
	if err := led.close(); err != nil {
		t.Errorf("closing the ledger: %v", err)
	}
	if err := w.ledgerErr(); err != nil {
		t.Errorf("writing the ledger: %v", err)
	}
	fmt.Printf("worker stats holds=%d lost=%d acquire_errors=%d read_only_errors=%d\n",
		w.holds.Load(), w.lost.Load(), w.acquireErrs.Load(), w.readOnlyErrs.Load())
	if n := w.acquireErrs.Load(); n > 0 {
		fmt.Printf("worker last acquire error: %v\n", w.lastAcquireErr.Load())
	}
	if e := w.unexpected.Load(); e != nil {
		t.Errorf("an acquisition failed with an error no fault of the run explains: %v", e)
	}
	fmt.Printf("worker done %d\n", w.holds.Load())
}

// serverSaysBug tells an acquire error the faults of the run cannot
// explain: the server answered with an error, and not one of those a
// restart, a cut or a killed session produce (those, and errors of the
// network itself, carry no server code or one of these), nor a refusal
// of the read-only switch that the library reported as dblock.ErrReadOnly
// (one it let through unclassified is a bug). Contention (deadlocks, lock
// wait timeouts, serialization failures) never reaches users, so it counts
// as a bug too, as do errors like MySQL's 1467 (the AUTO-INC lock under
// NOWAIT), which a run once produced unnoticed.
//
// stalled tells whether the process stood still during the acquisition
// (stallWatch): only then does an idle-in-transaction timeout (25P03) of
// the acquisition's own transaction have a cause in the run.
func serverSaysBug(err error, stalled bool) bool {
	if errors.Is(err, dblock.ErrReadOnly) {
		return false
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case 1053, // ER_SERVER_SHUTDOWN
			1927, // ER_CONNECTION_KILLED (MariaDB)
			4031: // ER_CLIENT_INTERACTION_TIMEOUT (MySQL 8.0): wait_timeout ended the session
			return false
		}
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"): // connection exception
			return false
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03":
			// admin_shutdown, crash_shutdown, cannot_connect_now
			return false
		case pgErr.Code == "25P03" && stalled:
			// idle_in_transaction_session_timeout: a SIGSTOP between two
			// statements of the acquisition, past the lock's TTL.
			return false
		}
		return true
	}
	return false
}

// Events a worker reports on stdout, once each, as soon as they happen,
// so that the suite sees them even from a worker it later kills.
const (
	// eventReadOnly: an acquisition failed with dblock.ErrReadOnly.
	eventReadOnly = "read-only-refused"
	// eventReadOnlyLost: a lock was lost with dblock.ErrReadOnly as cause.
	eventReadOnlyLost = "read-only-lost"
	// eventPoolerDetected: rowlock logged that its session connection
	// receives no notifications (a transaction pooler in front of it).
	eventPoolerDetected = "pooler-detected"
	// eventSessionEnded: rowlock logged that its session connection ended
	// and the locks taken under its marker were lost.
	eventSessionEnded = "session-ended"
)

// logEvents maps rowlock's log messages to the events they are.
var logEvents = map[string]string{
	"receives no notifications": eventPoolerDetected,
	"session connection ended":  eventSessionEnded,
}

// holder is a worker's state, shared by its goroutines.
type holder struct {
	dialect dblock.Dialect
	clockDB *sql.DB
	led     *ledger
	rl      *rowlock.Locker
	sem     dblock.Semaphore // of semLimit permits
	fl      *forupdate.Locker
	fsem    dblock.Semaphore // of semLimit permits
	// multiNames are the run's names of kind multi, which acquire draws
	// sets from.
	multiNames []string
	pid        int
	profile    holdProfile

	seq            atomic.Int64 // numbers the holds in the ledger
	holds, lost    atomic.Int64
	acquireErrs    atomic.Int64
	readOnlyErrs   atomic.Int64
	lastAcquireErr atomic.Value
	// unexpected is the last acquire error that no fault of the run
	// explains (see serverSaysBug).
	unexpected atomic.Value
	// stalls tells when the process stood still (serverSaysBug).
	stalls   stallWatch
	writeErr atomic.Pointer[error]
	events   sync.Map // event name -> struct{}: said already

	// kindsMu guards perKind: per kind, the holds recorded and the
	// acquisitions under way (see pick).
	kindsMu sync.Mutex
	perKind map[string]int
}

// pick chooses the name of the next hold: one of a kind that this process
// has held, or is acquiring, least often (at random among those), so that
// every worker holds every kind, whatever its path or clock, and the kinds
// share the run's time. The caller reports a hold not had with notHeld.
func (w *holder) pick(names []string) string {
	w.kindsMu.Lock()
	defer w.kindsMu.Unlock()
	if w.perKind == nil {
		w.perKind = map[string]int{}
	}
	least := -1
	var candidates []string
	for _, name := range names {
		switch n := w.perKind[kindOf(name)]; {
		case least < 0 || n < least:
			least, candidates = n, []string{name}
		case n == least:
			candidates = append(candidates, name)
		}
	}
	name := candidates[rand.IntN(len(candidates))]
	w.perKind[kindOf(name)]++
	return name
}

// notHeld says that the hold of name that pick chose was not had, so that
// its kind does not count it.
func (w *holder) notHeld(name string) {
	w.kindsMu.Lock()
	w.perKind[kindOf(name)]--
	w.kindsMu.Unlock()
}

func (w *holder) write(r record) {
	r.Pid = w.pid
	if err := w.led.add(r); err != nil {
		w.writeErr.CompareAndSwap(nil, &err)
	}
}

func (w *holder) ledgerErr() error {
	if p := w.writeErr.Load(); p != nil {
		return *p
	}
	return nil
}

// event says on stdout, the first time only, that something happened.
func (w *holder) event(name string) {
	if _, said := w.events.LoadOrStore(name, struct{}{}); !said {
		fmt.Printf("worker event %s\n", name)
	}
}

// eventHandler passes rowlock's log on to next (stderr), and reports the
// log lines that are events of the run.
type eventHandler struct {
	w    *holder
	next slog.Handler
}

func (h *eventHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *eventHandler) Handle(ctx context.Context, r slog.Record) error {
	for text, name := range logEvents {
		if strings.Contains(r.Message, text) {
			h.w.event(name)
		}
	}
	return h.next.Handle(ctx, r)
}

func (h *eventHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &eventHandler{w: h.w, next: h.next.WithAttrs(as)}
}

func (h *eventHandler) WithGroup(name string) slog.Handler {
	return &eventHandler{w: h.w, next: h.next.WithGroup(name)}
}

// holdProfile says how long holds last.
type holdProfile string

// holdProfiles, by name: each picks a hold's length from a percentile.
var holdProfiles = map[holdProfile]func(p int) time.Duration{
	// Mostly brief, as most users hold locks, and often past the TTL, so
	// that renewal, and losing the lease while holding (a cut, a restart,
	// a SIGSTOP), happen under load.
	"torture": func(p int) time.Duration {
		switch {
		case p < 50:
			return time.Duration(rand.IntN(30)) * time.Millisecond
		case p < 80:
			return time.Duration(30+rand.IntN(600)) * time.Millisecond
		default:
			return tortureTTL + time.Duration(rand.Int64N(int64(2*tortureTTL)))
		}
	},
	// Briefer, for many acquisitions in a soak, and still some past the
	// TTL.
	"soak": func(p int) time.Duration {
		switch {
		case p < 80:
			return time.Duration(rand.IntN(10)) * time.Millisecond
		case p < 97:
			return time.Duration(10+rand.IntN(300)) * time.Millisecond
		default:
			return tortureTTL + time.Duration(rand.Int64N(int64(2*tortureTTL)))
		}
	},
}

// holdFor picks how long to keep a lock.
func (w *holder) holdFor() time.Duration { return holdProfiles[w.profile](rand.IntN(100)) }

// hold takes name once, records the hold and releases it.
//
// The holder believes in its lock while Lock.Err is nil; it reads the
// database clock first and checks Err after, so every reading it records
// was taken while it still believed (belief only ever ends). A rowlock's
// lease outlives that belief by design. A forupdate lock lives exactly as
// long as its transaction, which the server may end at any moment (a cut
// connection, an idle timeout while the process is stopped), so its holder
// reads the clock inside that transaction: a read that succeeds proves the
// row was still locked at that time. So do forupdate's permits and
// read/write locks, which are such transactions too.
func (w *holder) hold(ctx context.Context, name string) {
	acquireCtx, cancel := context.WithTimeout(ctx, acquireTimeout)
	started := time.Now()
	lock, err := w.acquire(acquireCtx, name)
	cancel()
	if err != nil {
		w.notHeld(name)
		if !errors.Is(err, dblock.ErrNotAcquired) {
			// Cuts and restarts make some acquisitions fail; counted, and
			// shown, so a worker that only ever fails stands out.
			w.acquireErrs.Add(1)
			w.lastAcquireErr.Store(err.Error())
			if errors.Is(err, dblock.ErrReadOnly) {
				w.readOnlyErrs.Add(1)
				w.event(eventReadOnly)
			}
			if serverSaysBug(err, w.stalls.since(started)) {
				w.unexpected.Store(err.Error())
			}
			// A server that refuses at once (down, read-only) is not
			// hammered in a loop.
			time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
		}
		return
	}
	// Released once the end record is written, never before: a successor
	// must not be able to start while this hold has no end in the ledger.
	defer func() { _ = lock.Release(context.Background()) }()
	var clockQ querier = w.clockDB
	rec := record{Name: lock.Name(), Token: lock.Token()}
	switch k := lock.(type) {
	case *rowlock.Permit:
		rec.Slot = k.Slot()
	case *rowlock.RWLock:
		rec.Write = k.Exclusive()
	case *rowlock.MultiLock:
		rec.Names, rec.Tokens = k.Names(), k.Tokens()
	case *forupdate.Lock:
		clockQ = k.Tx()
	case fuWrite:
		clockQ, rec.Write = k.Tx(), true
	case *forupdate.Permit:
		clockQ, rec.Slot = k.Tx(), k.Slot()
	}
	start, err := dbNow(clockQ, w.dialect)
	if err != nil || lock.Err() != nil {
		w.notHeld(name)
		return
	}
	id := w.seq.Add(1)
	startRec := rec
	startRec.Kind, startRec.Hold, startRec.At = "start", id, start
	w.write(startRec)
	w.holds.Add(1)

	end, lost := start, false
	until := time.Now().Add(w.holdFor())
	for !lost && time.Now().Before(until) {
		pause := min(time.Until(until), time.Duration(20+rand.IntN(130))*time.Millisecond)
		select {
		case <-lock.Done(): // lost: record it now, not at the end of the pause
		case <-time.After(pause):
		}
		now, err := dbNow(clockQ, w.dialect)
		if err != nil || lock.Err() != nil {
			lost = true
			break
		}
		end = now
	}
	if lost {
		w.lost.Add(1)
		if errors.Is(lock.Err(), dblock.ErrReadOnly) {
			w.event(eventReadOnlyLost)
		}
	}
	ended, _ := dbNow(w.clockDB, w.dialect)
	endRec := rec
	endRec.Names, endRec.Tokens = nil, nil // the start's say them
	endRec.Kind, endRec.Hold, endRec.At, endRec.Lost, endRec.Ended = "end", id, end, lost, ended
	w.write(endRec)
}

// acquire takes a lock of name's kind (kindOf): a mutex, fair or not; a
// forupdate lock; a permit of a semaphore of semLimit, fair or not, or of
// a forupdate semaphore; the read lock of a read/write lock, rowlock's or
// forupdate's, or now and then its write lock; for a multi name, the
// names of a random set of the run's multi names that includes it, in a
// random order, with AcquireAll, or now and then that name alone, so that
// multi-locks and plain locks of the same names meet.
func (w *holder) acquire(ctx context.Context, name string) (dblock.Lock, error) {
	opts := []dblock.Option{dblock.TTL(tortureTTL)}
	switch kindOf(name) {
	case kindFair:
		return w.rl.Acquire(ctx, name, append(opts, dblock.Fair())...)
	case kindForUpdate:
		return w.fl.Acquire(ctx, name, opts...)
	case kindSemaphore:
		if rand.IntN(2) == 0 {
			opts = append(opts, dblock.Fair()) // in the semaphore's line
		}
		return w.sem.Acquire(ctx, name, opts...)
	case kindRW:
		if rand.IntN(3) == 0 {
			return w.rl.Writers().Acquire(ctx, name, opts...)
		}
		return w.rl.Readers().Acquire(ctx, name, opts...)
	case kindFUSemaphore:
		return w.fsem.Acquire(ctx, name, opts...) // no line: it refuses dblock.Fair
	case kindFURW:
		if rand.IntN(3) == 0 {
			k, err := w.fl.Writers().Acquire(ctx, name, opts...)
			if err != nil {
				return nil, err
			}
			return fuWrite{k.(*forupdate.Lock)}, nil
		}
		return w.fl.Readers().Acquire(ctx, name, opts...)
	case kindMulti:
		if rand.IntN(4) == 0 {
			return w.rl.Acquire(ctx, name, opts...)
		}
		set := []string{name}
		for _, other := range w.multiNames {
			if other != name && rand.IntN(2) == 0 {
				set = append(set, other)
			}
		}
		rand.Shuffle(len(set), func(i, j int) { set[i], set[j] = set[j], set[i] })
		m, err := w.rl.AcquireAll(ctx, set, opts...)
		if err != nil {
			return nil, err // not a nil *MultiLock in a non-nil dblock.Lock
		}
		return m, nil
	}
	return w.rl.Acquire(ctx, name, opts...)
}

// fuWrite is a forupdate write lock: its *forupdate.Lock does not say
// whether it reads or writes, as rowlock's RWLock does.
type fuWrite struct{ *forupdate.Lock }

// dbNowRetry reads the database clock, retrying for a while: a worker may
// start while the server is coming back from a restart.
func (w *holder) dbNowRetry(db *sql.DB) (int64, error) {
	var err error
	for range 100 {
		var us int64
		if us, err = dbNow(db, w.dialect); err == nil {
			return us, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, err
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// dbNow is the database clock in µs since the epoch.
func dbNow(db querier, d dblock.Dialect) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), tortureTTL)
	defer cancel()
	q := `SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`
	if d == dblock.MySQL {
		q = `SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`
	}
	var us int64
	err := db.QueryRowContext(ctx, q).Scan(&us)
	return us, err
}
