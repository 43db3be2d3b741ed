package rowlock_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// fenceCase is a holder of some lock kind and a contender that must not
// complete while the holder's fenced transaction is open, even once the
// holder's lease has lapsed.
type fenceCase struct {
	name string
	// hold takes the holder's lock on l; contend tries the other lock on
	// l (without wait: TryAcquire, which must say ErrNotAcquired rather
	// than wait). Both lock the name given.
	hold    func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error)
	contend func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error)
	try     bool
	// live: the holder's lease has time left (it is not cut short).
	live bool
}

func fenceCases() []fenceCase {
	// The holder's lease is long, so that it does not renew while the
	// test runs; the test shortens it in the table.
	ttl := dblock.TTL(time.Minute)
	mutex := func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
		return l.Acquire(ctx, name, ttl)
	}
	tryMutex := func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
		return l.TryAcquire(ctx, name)
	}
	read := func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
		return l.Readers().Acquire(ctx, name, ttl)
	}
	write := func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
		return l.Writers().Acquire(ctx, name, ttl)
	}
	sem := func(limit int, try bool) func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
		return func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
			s, err := l.Semaphore(limit)
			if err != nil {
				return nil, err
			}
			if try {
				return s.TryAcquire(ctx, name, ttl)
			}
			return s.Acquire(ctx, name, ttl)
		}
	}
	multi := func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
		return l.AcquireAll(ctx, []string{name, name + "/b"}, ttl)
	}
	return []fenceCase{
		{name: "mutex", hold: mutex, contend: mutex},
		{name: "mutex try", hold: mutex, contend: tryMutex, try: true},
		// Issue 23: on MariaDB a try waited behind a live holder's fenced
		// transaction, up to 8 lock wait timeouts.
		{name: "mutex try, live holder", hold: mutex, contend: tryMutex, try: true, live: true},
		{name: "semaphore try, live holder", hold: sem(1, false), contend: sem(1, true), try: true, live: true},
		{name: "writer passes a reader", hold: read, contend: write},
		{name: "writer tries past a reader", hold: read, contend: func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
			return l.Writers().TryAcquire(ctx, name)
		}, try: true},
		{name: "reader passes a writer", hold: write, contend: read},
		{name: "reader tries past a writer", hold: write, contend: func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
			return l.Readers().TryAcquire(ctx, name)
		}, try: true},
		// The only slot of a semaphore of one: its takeover.
		{name: "semaphore slot", hold: sem(1, false), contend: sem(1, false)},
		// A semaphore whose limit changes from 2 to 1 once no slot is
		// live: the lapsed holder of the other slot must be over first.
		{name: "semaphore limit", hold: sem(2, false), contend: sem(1, false)},
		{name: "multi-name", hold: multi, contend: multi},
	}
}

// TestNoTakeoverUnderAnOpenFence: a holder proves its hold with CheckHeld
// in a transaction, then stalls inside it past its lease (here: its lease
// is cut short in the table before the check, and it does not renew
// before the test ends). Another
// acquisition of the name, of any kind, must not complete until that
// transaction ends: it waits for it, or (a try) is refused at once. A
// contender that completed could write while the stalled holder's
// transaction, which passed CheckHeld, still reads and writes as the
// holder; this test then shows the holder's read seeing the contender's
// write.
func TestNoTakeoverUnderAnOpenFence(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		createFenceLedger(t, tg)
		for _, c := range fenceCases() {
			t.Run(tg.Name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
				defer cancel()
				name := testdb.Name(t)
				ledger := newFenceLedger(t, tg, name)
				holder, err := c.hold(ctx, newLocker(t, tg.DB), name)
				if err != nil {
					t.Fatalf("holder: %v", err)
				}
				defer func() { _ = holder.Release(context.Background()) }()

				if !c.live {
					leaseEndsSoon(t, tg, name)
				}
				fence, err := tg.DB.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = fence.Rollback() }()
				if err := holder.(dblock.Fencer).CheckHeld(ctx, fence); err != nil {
					t.Fatalf("CheckHeld: %v", err)
				}
				session := sessionOf(t, tg, fence)
				if !c.live {
					eventually(t, ctx, "the holder's lease to lapse", func() bool { return noLiveRows(t, tg, name) })
				}

				got := make(chan acquired, 1)
				go func() {
					k, err := c.contend(ctx, newLocker(t, tg.DB), name)
					got <- acquired{k, err}
				}()
				var r acquired
				blocked := false
				if c.try {
					// A try that waited would hang here, until the bound.
					select {
					case r = <-got:
					case <-ctx.Done():
						t.Fatalf("a try waited for the fenced transaction instead of returning ErrNotAcquired")
					}
					if !errors.Is(r.err, dblock.ErrNotAcquired) {
						t.Fatalf("try under an open fence = %v, want ErrNotAcquired", r.err)
					}
					return
				}
				eventually(t, ctx, "the contender to return or wait for the fenced transaction", func() bool {
					select {
					case r = <-got:
						return true
					default:
					}
					blocked = blockedBy(t, tg, session) > 0
					return blocked
				})
				if !blocked {
					if r.err != nil {
						t.Fatalf("contender: %v", r.err)
					}
					defer release(t, r.lock)
					ledger.write(t, r.lock.Token())
					t.Fatalf("the contender completed (token %d) while the holder's fenced transaction was open; "+
						"the holder's read in it then saw %d", r.lock.Token(), ledger.readIn(t, fence))
				}
				if seen := ledger.readIn(t, fence); seen != 0 {
					t.Fatalf("the holder's fenced read saw %d", seen)
				}
				if err := fence.Commit(); err != nil {
					t.Fatalf("commit of the fenced transaction: %v", err)
				}
				r = <-got
				if r.err != nil {
					t.Fatalf("contender after the fenced transaction ended: %v", r.err)
				}
				release(t, r.lock)
			})
		}
	}
}

// fenceLedger is a row that a contender writes to under its lock and the
// holder reads in its fenced transaction.
type fenceLedger struct {
	tg   testdb.Target
	name string
}

func newFenceLedger(t *testing.T, tg testdb.Target, name string) fenceLedger {
	t.Helper()
	ctx := t.Context()
	f := fenceLedger{tg: tg, name: name}
	if _, err := tg.DB.ExecContext(ctx, f.bind(`INSERT INTO sqllock_test_fence_ledger (name, token) VALUES (?, 0)`), name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = tg.DB.ExecContext(context.Background(), f.bind(`DELETE FROM sqllock_test_fence_ledger WHERE name = ?`), name)
	})
	return f
}

// createFenceLedger creates the ledger table once, before the parallel
// subtests: PostgreSQL's CREATE TABLE IF NOT EXISTS is not safe against
// itself (two sessions can both find no table, and one fails with 23505).
func createFenceLedger(t *testing.T, tg testdb.Target) {
	t.Helper()
	create := `CREATE TABLE IF NOT EXISTS sqllock_test_fence_ledger (name varchar(255) NOT NULL PRIMARY KEY, token bigint NOT NULL)`
	if _, err := tg.DB.ExecContext(t.Context(), create); err != nil {
		t.Fatalf("%s: %v", create, err)
	}
}

// bind numbers q's placeholders for PostgreSQL.
func (f fenceLedger) bind(q string) string {
	if f.tg.Dialect != dblock.Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (f fenceLedger) write(t *testing.T, token int64) {
	t.Helper()
	q := f.bind(`UPDATE sqllock_test_fence_ledger SET token = ? WHERE name = ?`)
	if _, err := f.tg.DB.ExecContext(t.Context(), q, token, f.name); err != nil {
		t.Fatal(err)
	}
}

func (f fenceLedger) readIn(t *testing.T, tx *sql.Tx) int64 {
	t.Helper()
	var token int64
	q := f.bind(`SELECT token FROM sqllock_test_fence_ledger WHERE name = ?`)
	if err := tx.QueryRowContext(t.Context(), q, f.name).Scan(&token); err != nil {
		t.Fatal(err)
	}
	return token
}

// leaseEndsSoon moves the lease of every lock row of name, of any kind,
// to end a second from now by the database clock. The rows are found by a
// plain read and updated by key: an UPDATE that scanned the table would
// lock (InnoDB) and wait for the rows of the other tests.
func leaseEndsSoon(t testing.TB, tg testdb.Target, name string) {
	t.Helper()
	find := `SELECT name FROM dblock_locks WHERE name = $1 OR name LIKE $2`
	update := `UPDATE dblock_locks SET expires_at = clock_timestamp() + interval '1 second' WHERE name = $1`
	if tg.Dialect == dblock.MySQL {
		find = `SELECT name FROM dblock_locks WHERE name = ? OR name LIKE ?`
		update = `UPDATE dblock_locks SET expires_at = UTC_TIMESTAMP(6) + INTERVAL 1 SECOND WHERE name = ?`
	}
	rows, err := tg.DB.QueryContext(t.Context(), find, name, name+"%")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, err := tg.DB.ExecContext(t.Context(), update, n); err != nil {
			t.Fatal(err)
		}
	}
}

// noLiveRows reports whether no lock row of name, of any kind, has a live
// lease by the database clock.
func noLiveRows(t testing.TB, tg testdb.Target, name string) bool {
	t.Helper()
	q := `SELECT count(*) FROM dblock_locks WHERE (name = $1 OR name LIKE $2) AND expires_at > clock_timestamp()`
	if tg.Dialect == dblock.MySQL {
		q = `SELECT count(*) FROM dblock_locks WHERE (name = ? OR name LIKE ?) AND expires_at > UTC_TIMESTAMP(6)`
	}
	var n int
	if err := tg.DB.QueryRowContext(t.Context(), q, name, name+"%").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 0
}

// sessionOf is the server session that runs tx.
func sessionOf(t testing.TB, tg testdb.Target, tx *sql.Tx) int64 {
	t.Helper()
	q := `SELECT pg_backend_pid()`
	if tg.Dialect == dblock.MySQL {
		q = `SELECT CONNECTION_ID()`
	}
	var id int64
	if err := tx.QueryRowContext(t.Context(), q).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// blockedBy counts the sessions that wait for a row lock of session's.
// InnoDB refreshes these views only when they were last read more than
// 0.1 s ago, so on MySQL it pauses that long first: read more often, they
// would show the same picture for ever.
func blockedBy(t testing.TB, tg testdb.Target, session int64) int {
	t.Helper()
	q := `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))`
	if tg.Dialect == dblock.MySQL {
		q = `
SELECT count(*) FROM information_schema.INNODB_LOCK_WAITS w
JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id
WHERE b.trx_mysql_thread_id = ?`
	}
	if tg.Dialect == dblock.MySQL {
		time.Sleep(150 * time.Millisecond)
	}
	var n int
	if err := tg.DB.QueryRowContext(t.Context(), q, session).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
