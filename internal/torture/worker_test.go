package torture_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
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
)

// TestTortureWorker is a worker process: perWorker goroutines acquire the
// names in SQLLOCK_TORTURE_NAMES for SQLLOCK_TORTURE_RUN_FOR (and until
// the process has recorded a hold), writing each hold to the ledger. It
// then closes everything it opened and fails if a goroutine is left. In a
// normal run it returns at once.
func TestTortureWorker(t *testing.T) {
	if !testdb.IsChild() || os.Getenv(envDSN) == "" {
		return
	}
	leaks := goleak.IgnoreCurrent()
	dialect, err := lockkit.ParseDialect(os.Getenv(envDialect))
	if err != nil {
		t.Fatal(err)
	}
	runFor, err := time.ParseDuration(os.Getenv(envRunFor))
	if err != nil {
		t.Fatal(err)
	}
	driver := map[dblock.Dialect]string{dblock.Postgres: "pgx", dblock.MySQL: "mysql"}[dialect]
	lockDB, err := sql.Open(driver, os.Getenv(envDSN))
	if err != nil {
		t.Fatal(err)
	}
	clockDB, err := sql.Open(driver, os.Getenv(envClockDSN))
	if err != nil {
		t.Fatal(err)
	}
	led, err := openLedger(os.Getenv(envLedger))
	if err != nil {
		t.Fatal(err)
	}
	rl, err := rowlock.New(lockDB, rowlock.WithWaiterTTL(tortureTTL), rowlock.WithPollInterval(5*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	fl, err := forupdate.New(lockDB)
	if err != nil {
		t.Fatal(err)
	}
	w := &holder{dialect: dialect, clockDB: clockDB, led: led, rl: rl, fl: fl, pid: os.Getpid()}

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
	var wg sync.WaitGroup
	for range perWorker {
		wg.Go(func() {
			for ctx.Err() == nil && (time.Now().Before(deadline) || w.holds.Load() == 0) {
				w.hold(ctx, names[rand.IntN(len(names))])
			}
		})
	}
	wg.Wait()

	// Everything the worker opened is closed, and nothing is left running.
	if err := rl.Close(); err != nil {
		t.Errorf("rowlock Close: %v", err)
	}
	if err := fl.Close(); err != nil {
		t.Errorf("forupdate Close: %v", err)
	}
	for _, c := range []interface{ Close() error }{lockDB, clockDB} {
		if err := c.Close(); err != nil {
			t.Errorf("closing a pool: %v", err)
		}
	}
	if err := led.close(); err != nil {
		t.Errorf("closing the ledger: %v", err)
	}
	if err := goleak.Find(leaks); err != nil {
		t.Errorf("worker leaked goroutines: %v", err)
	}
	if err := w.ledgerErr(); err != nil {
		t.Errorf("writing the ledger: %v", err)
	}
	fmt.Printf("worker stats holds=%d lost=%d acquire_errors=%d\n", w.holds.Load(), w.lost.Load(), w.acquireErrs.Load())
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
// network itself, carry no server code or one of these). Contention
// (deadlocks, lock wait timeouts, serialization failures) never reaches
// users, so it counts as a bug too, as do errors like MySQL's 1467 (the
// AUTO-INC lock under NOWAIT), which a run once produced unnoticed.
func serverSaysBug(err error) bool {
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
		}
		return true
	}
	return false
}

// holder is a worker's state, shared by its goroutines.
type holder struct {
	dialect dblock.Dialect
	clockDB *sql.DB
	led     *ledger
	rl      *rowlock.Locker
	fl      *forupdate.Locker
	pid     int

	seq            atomic.Int64 // numbers the holds in the ledger
	holds, lost    atomic.Int64
	acquireErrs    atomic.Int64
	lastAcquireErr atomic.Value
	// unexpected is the last acquire error that no fault of the run
	// explains (see serverSaysBug).
	unexpected atomic.Value
	writeErr   atomic.Pointer[error]
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

// holdFor picks how long to keep a lock: mostly briefly, as most users
// do, and often past the TTL, so that renewal, and losing the lease while
// holding (a cut, a restart, a SIGSTOP), happen under load.
func holdFor() time.Duration {
	switch p := rand.IntN(100); {
	case p < 50:
		return time.Duration(rand.IntN(30)) * time.Millisecond
	case p < 80:
		return time.Duration(30+rand.IntN(600)) * time.Millisecond
	default:
		return tortureTTL + time.Duration(rand.Int64N(int64(2*tortureTTL)))
	}
}

// hold takes name once, records the hold and releases it.
//
// The holder believes in its lock while Lock.Err is nil; it reads the
// database clock first and checks Err after, so every reading it records
// was taken while it still believed (belief only ever ends). A rowlock's
// lease outlives that belief by design. A forupdate lock lives exactly as
// long as its transaction, which the server may end at any moment (a cut
// connection, an idle timeout while the process is stopped), so its holder
// reads the clock inside that transaction: a read that succeeds proves the
// row was still locked at that time.
func (w *holder) hold(ctx context.Context, name string) {
	opts := []dblock.Option{dblock.TTL(tortureTTL)}
	var l dblock.Locker = w.rl
	switch kindOf(name) {
	case "fair":
		opts = append(opts, dblock.Fair())
	case "forupdate":
		l = w.fl
	}
	acquireCtx, cancel := context.WithTimeout(ctx, acquireTimeout)
	lock, err := l.Acquire(acquireCtx, name, opts...)
	cancel()
	if err != nil {
		if !errors.Is(err, dblock.ErrNotAcquired) {
			// Cuts and restarts make some acquisitions fail; counted, and
			// shown, so a worker that only ever fails stands out.
			w.acquireErrs.Add(1)
			w.lastAcquireErr.Store(err.Error())
			if serverSaysBug(err) {
				w.unexpected.Store(err.Error())
			}
		}
		return
	}
	// Released once the end record is written, never before: a successor
	// must not be able to start while this hold has no end in the ledger.
	defer func() { _ = lock.Release(context.Background()) }()
	var clockQ querier = w.clockDB
	if fu, ok := lock.(*forupdate.Lock); ok {
		clockQ = fu.Tx()
	}
	start, err := dbNow(clockQ, w.dialect)
	if err != nil || lock.Err() != nil {
		return
	}
	id := w.seq.Add(1)
	w.write(record{Kind: "start", Hold: id, Name: name, Token: lock.Token(), At: start})
	w.holds.Add(1)

	end, lost := start, false
	until := time.Now().Add(holdFor())
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
	}
	ended, _ := dbNow(w.clockDB, w.dialect)
	w.write(record{Kind: "end", Hold: id, Name: name, Token: lock.Token(), At: end, Lost: lost, Ended: ended})
}

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
