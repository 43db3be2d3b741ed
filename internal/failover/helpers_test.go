package failover_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

func TestMain(m *testing.M) {
	// Every goroutine the Lockers start must be stopped by Release or
	// Close, a switchover or not.
	testdb.Main(m)
}

// kind is one kind of lock, as the tests drive it.
type kind struct {
	name string
	// newLocker returns a Locker on db, closed when the test ends.
	newLocker func(t testing.TB, db *sql.DB) dblock.Locker
	opts      []dblock.Option
	// keepsLock: a holder keeps its lock across a switchover shorter than
	// its lease, because the lock is a row that was replicated, and it
	// relies on no session marker. A forupdate lock is a transaction, and
	// a marked rowlock lock relies on its session's marker (see rowlock's
	// package doc, Crash detection): both end with the old primary.
	keepsLock bool
}

var kinds = []kind{
	{name: "rowlock", newLocker: newUnmarkedRowlock, keepsLock: true},
	{name: "rowlock-fair", newLocker: newUnmarkedRowlock, opts: []dblock.Option{dblock.Fair()}, keepsLock: true},
	{name: "rowlock-marked", newLocker: newMarkedRowlock},
	{name: "forupdate", newLocker: newForupdate},
}

// newMarkedRowlock is a rowlock Locker as New makes it: with session
// markers.
func newMarkedRowlock(t testing.TB, db *sql.DB) dblock.Locker {
	t.Helper()
	return newRowlock(t, db)
}

// newUnmarkedRowlock is a rowlock Locker without session markers: the
// lease alone decides.
func newUnmarkedRowlock(t testing.TB, db *sql.DB) dblock.Locker {
	t.Helper()
	return newRowlock(t, db, rowlock.WithCrashGrace(0))
}

// testPause is the failover pause of these tests' Lockers (opts may set
// another): as long as keptTTL, so that a holder believes in its lock as
// long as its lease (a holder believes for at most the pause) and keeps it
// across a switchover; takes on a promoted server wait that long.
const testPause = keptTTL

func newRowlock(t testing.TB, db *sql.DB, opts ...rowlock.Option) dblock.Locker {
	t.Helper()
	l, err := rowlock.New(db, append([]rowlock.Option{rowlock.WithFailoverPause(testPause)}, opts...)...)
	if err != nil {
		t.Fatalf("rowlock.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func newForupdate(t testing.TB, db *sql.DB) dblock.Locker {
	t.Helper()
	l, err := forupdate.New(db, forupdate.WithFailoverPause(testPause))
	if err != nil {
		t.Fatalf("forupdate.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// Before the switchover, each kind takes tokensEach tokens on each of
// tokenNames names.
const (
	tokenNames = 3
	tokensEach = 3
)

// Leases. keptTTL is long beside a switchover (a fraction of a second
// here), so a rowlock holder renews (every TTL/3) on both sides of it and
// keeps its lock; a forupdate holder pings every TTL/3, and learns then
// that its transaction is gone. lostTTL is short, so that a holder cut off
// from every writable server gives up soon.
const (
	keptTTL = 6 * time.Second
	lostTTL = time.Second
)

// keptOutage is the longest switchover (from stopping the primary to the
// end of the promotion) that a holder of keptTTL must bridge: it believes
// 0.9·keptTTL after its last renewal, which came up to keptTTL/3 before
// the stop, and its first retry on the new primary needs a moment (a
// second is plenty). A switchover is a fraction of a second here; a
// loaded machine can make it last longer, and the holder then rightly
// lets its lock go.
const keptOutage = keptTTL*9/10 - keptTTL/3 - time.Second

// bound is how long any wait of these tests may take before it fails the
// test: a bound against hangs, not a timing assertion.
const bound = time.Minute

// takeTokens takes and releases name n times through l, and returns the
// last token. Every token must be larger than after, and than the one
// before it. The takes wait (at most bound): after a promotion, for the
// failover pause.
func takeTokens(t testing.TB, ctx context.Context, l dblock.Locker, name string, n int, after int64, opts []dblock.Option, sc *staleConns) int64 {
	t.Helper()
	for range n {
		var k dblock.Lock
		sc.do(t, "Acquire", func() (err error) {
			waitCtx, cancel := context.WithTimeout(ctx, bound)
			defer cancel()
			k, err = l.Acquire(waitCtx, name, opts...)
			return err
		})
		if k.Token() <= after {
			t.Fatalf("%q: token %d after token %d", name, k.Token(), after)
		}
		after = k.Token()
		sc.do(t, "Release", func() error { return k.Release(ctx) })
	}
	return after
}

// staleConns accounts for a pool's connections to the old primary after a
// switchover. The old primary's fast shutdown ended their sessions
// (SQLSTATE 57P01, sent to each), but the pool does not know until it uses
// them: pgx pings a connection before reusing it only when it has been
// idle for more than a second. So a call right after a switchover may get
// 57P01 once for each such connection, and then succeeds on a new one.
type staleConns struct {
	mu   sync.Mutex
	left int // connections that may still fail one call
}

// staleAfterStop counts db's connections once the primary has stopped:
// all of them are to the old primary (none can be made until the standby
// is promoted), and each can fail at most one call.
func staleAfterStop(db *sql.DB) *staleConns {
	return &staleConns{left: db.Stats().OpenConnections}
}

// do runs op again while it fails on a connection to the old primary, and
// fails the test if that happens more often than there were such
// connections, or op fails otherwise.
func (sc *staleConns) do(t testing.TB, what string, op func() error) {
	t.Helper()
	for {
		err := op()
		if !endedByShutdown(err) {
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return
		}
		if sc == nil {
			t.Fatalf("%s: %v, and no switchover happened", what, err)
		}
		sc.mu.Lock()
		sc.left--
		left := sc.left
		sc.mu.Unlock()
		if left < 0 {
			t.Fatalf("%s: %v: more calls failed on connections to the old primary than the pool had", what, err)
		}
		t.Logf("%s: %v (a pooled connection to the old primary); again", what, err)
	}
}

// endedByShutdown tells the error a session ended by the old primary's
// fast shutdown gives (admin_shutdown).
func endedByShutdown(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "57P01"
}

// wantReadOnly fails the test unless err says read-only (and not "not
// acquired": a job that is "not acquired" on a standby would quietly never
// run again).
func wantReadOnly(t testing.TB, what string, err error) {
	t.Helper()
	if !errors.Is(err, dblock.ErrReadOnly) || errors.Is(err, dblock.ErrNotAcquired) {
		t.Errorf("%s on a standby = %v, want ErrReadOnly (and not ErrNotAcquired)", what, err)
	}
}

// waitDone waits for k's Done, failing the test after bound.
func waitDone(t testing.TB, k dblock.Lock) {
	t.Helper()
	select {
	case <-k.Done():
	case <-time.After(bound):
		t.Fatalf("lock %q: Done not closed after %v", k.Name(), bound)
	}
}

// expiresAt reads the end of name's lease from db, in microseconds since
// the epoch.
func expiresAt(t testing.TB, db *sql.DB, name string) int64 {
	t.Helper()
	var us int64
	err := db.QueryRowContext(context.Background(),
		`SELECT (extract(epoch FROM expires_at) * 1000000)::bigint FROM dblock_locks WHERE name = $1`, name).Scan(&us)
	if err != nil {
		t.Fatalf("expires_at of %q: %v", name, err)
	}
	return us
}

// pooled is how many idle connections the users' pool keeps.
const pooled = 4

// warm opens n connections in db at once and puts them back idle, twice:
// pgx pings a connection before its first reuse, and again only once it
// has been idle for a second, so only the second round makes them
// connections that a call soon after will use without asking.
func warm(t testing.TB, db *sql.DB, n int) {
	t.Helper()
	db.SetMaxIdleConns(n)
	for range 2 {
		conns := make([]*sql.Conn, 0, n)
		for range n {
			c, err := db.Conn(context.Background())
			if err == nil {
				err = c.PingContext(context.Background())
			}
			if err != nil {
				t.Fatalf("warm the pool: %v", err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			_ = c.Close()
		}
	}
}
