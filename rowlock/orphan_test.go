package rowlock_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestCutShortTryLeavesNothingHeld: an Acquire whose try's take statement
// waits for a row lock (a transaction holds it) gives up when its context
// ends. (TryAcquire's own take never waits for a row lock: it answers
// ErrNotAcquired at once, TestNoTakeoverUnderAnOpenFence; the kinds' tries
// inside a waiting acquisition do wait, as Acquire's.) PostgreSQL runs the statement anyway once the row lock comes free
// (found by this test: it fails there without dropOrphan), taking the lock
// for an owner that nobody will ever release; MariaDB appears to end it
// with its client's connection. Once the Locker has closed (Close waits
// for the drop it starts in the background), the name is free, long
// before the lease that take would have written could lapse.
//
// Two takes are cut short: the UPDATE of a name used before, waiting for
// the name's row, and, on PostgreSQL, the INSERT of a fresh name, waiting
// for its stripe's token counter (MySQL inserts in a transaction that is
// never committed once its client has gone). The drop on PostgreSQL must
// wait for the take's mark (pgAwaitTake): the row lock alone goes to the
// drop first about one time in a hundred, and for a fresh name there is
// no row to wait for (both seen with the await removed).
//
// pgx, giving up on a statement, also sends the server a cancel request
// (asyncClose), which ends the take unless the blocker has committed
// first: a race that made this test fail about one run in a hundred. The
// Locker's connections here never deliver that request, so the take always
// outlives its client, as it does whenever the cancel request is late or
// lost (a client that crashed sends none).
func TestCutShortTryLeavesNothingHeld(t *testing.T) {
	cases := []struct {
		name      string
		fresh     bool
		dialects  []dblock.Dialect
		blockStmt map[dblock.Dialect]string // locks what the take waits for; $1/?: the name or its stripe
	}{
		{"used name", false, []dblock.Dialect{dblock.Postgres, dblock.MySQL}, map[dblock.Dialect]string{
			dblock.Postgres: `SELECT 1 FROM dblock_locks WHERE name = $1 FOR UPDATE`,
			dblock.MySQL:    `SELECT 1 FROM dblock_locks WHERE name = ? FOR UPDATE`,
		}},
		{"fresh name", true, []dblock.Dialect{dblock.Postgres}, map[dblock.Dialect]string{
			dblock.Postgres: `INSERT INTO dblock_fences AS f (stripe, token) VALUES ($1, 0)
ON CONFLICT (stripe) DO UPDATE SET token = f.token RETURNING 1`,
		}},
	}
	for _, tg := range testdb.Targets(t) {
		for _, c := range cases {
			if !slices.Contains(c.dialects, tg.Dialect) {
				continue
			}
			t.Run(tg.Name+"/"+c.name, func(t *testing.T) {
				cutShortTry(t, tg, c.fresh, c.blockStmt[tg.Dialect])
			})
		}
	}
}

// cutShortTry is one case of TestCutShortTryLeavesNothingHeld: block
// locks what the take of name (fresh, or taken and released first) waits
// for.
func cutShortTry(t *testing.T, tg testdb.Target, fresh bool, block string) {
	ctx := t.Context()
	db := tg.DB
	if tg.Dialect == dblock.Postgres {
		db = withoutCancelRequests(t, tg)
	}
	l, err := rowlock.New(db)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	name := testdb.Name(t)
	var blockArg any = name
	if fresh {
		blockArg = rowlock.StripeOf(name)
	} else {
		k, err := l.TryAcquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		release(t, k)
	}
	blocker, err := tg.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback()
	var one int
	if err := blocker.QueryRowContext(ctx, block, blockArg).Scan(&one); err != nil {
		t.Fatal(err)
	}
	// The blocker's session, and how many sessions wait for it,
	// asked on another connection: PostgreSQL's activity view is
	// a snapshot for the whole of a transaction that reads it.
	self, blocked := `SELECT pg_backend_pid()`, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`
	poll := 5 * time.Millisecond
	if tg.Dialect == dblock.MySQL {
		self, blocked = `SELECT CONNECTION_ID()`, `
SELECT count(*) FROM information_schema.INNODB_LOCK_WAITS w
JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id
WHERE b.trx_mysql_thread_id = ?`
		// InnoDB refreshes what these views show only when they
		// were last read more than 0.1 s ago.
		poll = 150 * time.Millisecond
	}
	var session int64
	if err := blocker.QueryRowContext(ctx, self).Scan(&session); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithCancel(ctx)
	tried := make(chan error, 1)
	go func() {
		_, err := l.Acquire(short, name)
		tried <- err
	}()
	// Cut the try short only once its take waits for the lock: it has
	// marked itself (PostgreSQL) or queued for the row (MySQL) by then, so
	// the drop it starts waits for it.
	waitCtx, stopWaiting := context.WithTimeout(ctx, time.Minute) // liveness bound
	defer stopWaiting()
	// found reports whether a count of sessions waiting (query, asked
	// about the blocker's session) is above zero, pausing when not.
	found := func(query string) bool {
		var n int
		if err := tg.DB.QueryRowContext(ctx, query, session).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			time.Sleep(poll)
		}
		return n > 0
	}
	eventually(t, waitCtx, "the take to wait for the row lock", func() bool {
		select {
		case err := <-tried:
			t.Fatalf("Acquire returned before it waited for the row lock: %v", err)
		default:
		}
		return found(blocked)
	})
	cancel()
	if err := <-tried; !errors.Is(err, dblock.ErrNotAcquired) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire cut short: %v, want ErrNotAcquired and Canceled", err)
	}
	if tg.Dialect == dblock.Postgres {
		// The drop must wait for the take's mark: until it does, the
		// blocker stays, so that a drop that does not wait for it fails
		// the test at every run, not only when it is quick (a fresh name)
		// or comes just after the blocker commits (a used one: waiting
		// for the row lock instead is a race it can lose).
		const dropWaits = `
SELECT count(*) FROM pg_stat_activity d
WHERE d.wait_event = 'advisory'
  AND EXISTS (SELECT 1 FROM pg_stat_activity t
              WHERE $1 = ANY (pg_blocking_pids(t.pid)) AND t.pid = ANY (pg_blocking_pids(d.pid)))`
		eventually(t, waitCtx, "the drop to wait for the cut-short take", func() bool { return found(dropWaits) })
	}
	if err := blocker.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if row := readRow(t, tg, name); row.holdCount != 0 {
		t.Fatalf("after the cut-short Acquire and Close: %+v; want nobody holding it", row)
	}
	other := newLocker(t, tg.DB)
	k, err := other.TryAcquire(ctx, name)
	if err != nil {
		t.Fatalf("TryAcquire after the cut-short one: %v", err)
	}
	release(t, k)
}

// withoutCancelRequests opens tg's PostgreSQL database with connections
// that swallow the cancel requests pgx sends on them (see
// TestCutShortTryLeavesNothingHeld). They do without TLS, so that a cancel
// request can be told from the first bytes written on a connection.
func withoutCancelRequests(t *testing.T, tg testdb.Target) *sql.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(tg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLSConfig, cfg.Fallbacks = nil, nil
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &noCancelConn{Conn: c}, nil
	}
	// pgx closes a connection whose statement was cut short in a goroutine
	// of its own (asyncClose), which the pool's Close does not wait for:
	// the cleanup does, so that the leak check does not catch it running.
	var mu sync.Mutex
	var conns []*pgconn.PgConn
	db := stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(func(_ context.Context, c *pgx.Conn) error {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c.PgConn())
		return nil
	}))
	t.Cleanup(func() {
		_ = db.Close()
		mu.Lock()
		defer mu.Unlock()
		timeout := time.After(20 * time.Second) // pgx gives a close 15 s
		for _, c := range conns {
			select {
			case <-c.CleanupDone():
			case <-timeout:
				t.Error("a pgx connection still closing 20 s after its pool was closed")
				return
			}
		}
	})
	return db
}

// noCancelConn closes itself, unsent, when the first thing written on it
// is a cancel request (length 16, code 80877102).
type noCancelConn struct {
	net.Conn
	once sync.Once
}

func (c *noCancelConn) Write(b []byte) (int, error) {
	cancelRequest := false
	c.once.Do(func() {
		cancelRequest = len(b) == 16 && binary.BigEndian.Uint32(b) == 16 && binary.BigEndian.Uint32(b[4:]) == 80877102
	})
	if cancelRequest {
		_ = c.Conn.Close()
		return len(b), nil
	}
	return c.Conn.Write(b)
}
