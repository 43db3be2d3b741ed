package rowlock_test

import (
	"context"
	"database/sql"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

func TestMain(m *testing.M) {
	// Every goroutine rowlock starts must be stopped by Release or Close.
	testdb.Main(m)
}

// newLocker returns a Locker on db that is closed when the test ends.
func newLocker(t testing.TB, db *sql.DB, opts ...rowlock.Option) *rowlock.Locker {
	t.Helper()
	l, err := rowlock.New(db, opts...)
	if err != nil {
		t.Fatalf("rowlock.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// release releases k and fails the test on error.
func release(t testing.TB, k dblock.Lock) {
	t.Helper()
	if err := k.Release(context.Background()); err != nil {
		t.Fatalf("Release(%q): %v", k.Name(), err)
	}
}

// rowState reads a lock's row straight from the table.
type rowState struct {
	exists    bool
	token     int64
	holdCount int
	note      string
	ownerID   string
}

func readRow(t testing.TB, tg testdb.Target, name string) rowState {
	t.Helper()
	q := `SELECT token, hold_count, note, owner_id FROM dblock_locks WHERE name = $1`
	if tg.Dialect != dblock.Postgres {
		q = `SELECT token, hold_count, note, owner_id FROM dblock_locks WHERE name = ?`
	}
	var r rowState
	err := tg.DB.QueryRowContext(context.Background(), q, name).Scan(&r.token, &r.holdCount, &r.note, &r.ownerID)
	if err == sql.ErrNoRows {
		return rowState{}
	}
	if err != nil {
		t.Fatalf("read row %q: %v", name, err)
	}
	r.exists = true
	return r
}

// expireNow moves a lock's lease into the past by the database clock, as if
// its holder had stopped renewing long ago.
func expireNow(t testing.TB, tg testdb.Target, name string) {
	t.Helper()
	q := `UPDATE dblock_locks SET expires_at = clock_timestamp() - interval '1 second' WHERE name = $1`
	switch tg.Dialect {
	case dblock.MySQL:
		q = `UPDATE dblock_locks SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE name = ?`
	case dblock.SQLite:
		q = `UPDATE dblock_locks SET expires_at = ` + sqliteNow + ` - 1000000 WHERE name = ?`
	}
	if _, err := tg.DB.ExecContext(context.Background(), q, name); err != nil {
		t.Fatalf("expire %q: %v", name, err)
	}
}

// sqliteNow is the database clock on SQLite, in µs since the epoch, as
// rowlock reads it.
const sqliteNow = `CAST(unixepoch('subsec') * 1000000 AS INTEGER)`

// waitDone waits for a lock's Done channel, failing after limit (a bound
// against hangs, not a timing assertion).
func waitDone(t testing.TB, k dblock.Lock, limit time.Duration) {
	t.Helper()
	select {
	case <-k.Done():
	case <-time.After(limit):
		t.Fatalf("lock %q: Done not closed after %v", k.Name(), limit)
	}
}

// acquiredAtMicros reads a lock's acquired_at, by the database clock, in
// microseconds since the epoch.
func acquiredAtMicros(t testing.TB, tg testdb.Target, name string) int64 {
	t.Helper()
	q := `SELECT (extract(epoch FROM acquired_at) * 1000000)::bigint FROM dblock_locks WHERE name = $1`
	switch tg.Dialect {
	case dblock.MySQL:
		q = `SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', acquired_at) FROM dblock_locks WHERE name = ?`
	case dblock.SQLite:
		q = `SELECT acquired_at FROM dblock_locks WHERE name = ?`
	}
	var us int64
	if err := tg.DB.QueryRowContext(context.Background(), q, name).Scan(&us); err != nil {
		t.Fatalf("acquired_at of %q: %v", name, err)
	}
	return us
}

// dbNowMicros reads the database clock, in microseconds since the epoch.
func dbNowMicros(t testing.TB, tg testdb.Target) int64 {
	t.Helper()
	q := `SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`
	switch tg.Dialect {
	case dblock.MySQL:
		q = `SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))`
	case dblock.SQLite:
		q = `SELECT ` + sqliteNow
	}
	var us int64
	if err := tg.DB.QueryRowContext(context.Background(), q).Scan(&us); err != nil {
		t.Fatalf("database clock: %v", err)
	}
	return us
}

// expiresAtMicros reads a lock's expires_at, by the database clock, in
// microseconds since the epoch.
func expiresAtMicros(t testing.TB, tg testdb.Target, name string) int64 {
	t.Helper()
	q := `SELECT (extract(epoch FROM expires_at) * 1000000)::bigint FROM dblock_locks WHERE name = $1`
	switch tg.Dialect {
	case dblock.MySQL:
		q = `SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', expires_at) FROM dblock_locks WHERE name = ?`
	case dblock.SQLite:
		q = `SELECT expires_at FROM dblock_locks WHERE name = ?`
	}
	var us int64
	if err := tg.DB.QueryRowContext(context.Background(), q, name).Scan(&us); err != nil {
		t.Fatalf("expires_at of %q: %v", name, err)
	}
	return us
}

// waitDBClockPast polls (bounded) until the database clock is past us
// (microseconds since the epoch).
func waitDBClockPast(t testing.TB, tg testdb.Target, us int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a bound against hangs only
	for dbNowMicros(t, tg) <= us {
		if time.Now().After(deadline) {
			t.Fatalf("database clock never passed %d", us)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sleepBriefly is the pause of the tests' bounded polling loops.
func sleepBriefly() { time.Sleep(5 * time.Millisecond) }

// eventually polls cond until it holds, failing the test if ctx ends first
// (a bound against hangs, not a timing assertion).
func eventually(t testing.TB, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("%s: %v", what, ctx.Err())
		}
		sleepBriefly()
	}
}

// sweepAll runs one whole sweep (every batch, from the first name to the
// last) and returns how many rows it deleted.
func sweepAll(t testing.TB, ctx context.Context, l *rowlock.Locker, grace time.Duration, limit int) int {
	t.Helper()
	total := 0
	for after := ""; ; {
		n, next, err := l.Sweep(ctx, grace, limit, after)
		if err != nil {
			t.Fatalf("Sweep after %q: %v", after, err)
		}
		total += n
		if next == "" {
			return total
		}
		if next <= after {
			t.Fatalf("Sweep after %q returned %q: the position must move forward", after, next)
		}
		after = next
	}
}

// sessionKeyOf reads the session marker recorded in name's row (trusted or
// not).
func sessionKeyOf(t testing.TB, tg testdb.Target, name string) int64 {
	t.Helper()
	return lockColumn[int64](t, tg, "session_key", name)
}

// lockColumn reads column col of name's row in dblock_locks.
func lockColumn[T any](t testing.TB, tg testdb.Target, col, name string) T {
	t.Helper()
	q := tg.Q(`SELECT ` + col + ` FROM dblock_locks WHERE name = $1`)
	var v T
	if err := tg.DB.QueryRowContext(context.Background(), q, name).Scan(&v); err != nil {
		t.Fatalf("%s of %q: %v", col, name, err)
	}
	return v
}

// childReleases has a TestChildHolderReleasesOnSignal child release its
// lock, and waits until it says so.
func childReleases(t testing.TB, ctx context.Context, child *testdb.ChildProcess) {
	t.Helper()
	if err := child.Cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if _, err := child.WaitLine(ctx, "released"); err != nil {
		t.Fatal(err)
	}
}
