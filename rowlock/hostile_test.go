package rowlock_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// hostileMaxMessage bounds what an error may echo of its input: a 10 MB
// name must not come back as a 10 MB error message.
const hostileMaxMessage = 1024

// hostileCase is one hostile or mistaken input. arrange prepares what the
// input needs (locks held, pools closed) and returns the call to make; the
// runner snapshots the lock and waiter rows around that call.
type hostileCase struct {
	name string
	// want lists sentinels the error must wrap (errors.Is); empty means
	// the call must succeed (inputs that look hostile but are legal).
	want []error
	// msg, when set, must appear in the error text.
	msg     string
	arrange func(e *hostileEnv) func(ctx context.Context) error
}

// hostileEnv is what one case runs against.
type hostileEnv struct {
	t  *testing.T
	tg testdb.Target
	// db and l are the case's own pool and Locker: a call that panics
	// inside database/sql can leave a pool's mutex locked for good, and
	// must not take the other cases down with it.
	db     *sql.DB
	l      *rowlock.Locker
	prefix string // every name the case makes starts with it
	// wedged is set when the call panicked: clean-ups that would use the
	// case's pool are skipped (they could block forever).
	wedged bool
	// watched are names outside the prefix whose rows must not change
	// (the empty name, for one).
	watched []string
	// writes are the names the call may write (a legal name acquired).
	writes []string
	// then runs after the snapshots were compared: checks that need to
	// change rows (the handle still works after a refused call).
	then []func()
}

// n returns a name of this case: the prefix plus suffix.
func (e *hostileEnv) n(suffix string) string { return e.prefix + suffix }

func (e *hostileEnv) watch(names ...string) { e.watched = append(e.watched, names...) }

func (e *hostileEnv) mayWrite(names ...string) { e.writes = append(e.writes, names...) }

func (e *hostileEnv) andThen(fn func()) { e.then = append(e.then, fn) }

// hold takes name for a fresh owner and releases it when the test ends.
func (e *hostileEnv) hold(name string, opts ...dblock.Option) dblock.Lock {
	e.t.Helper()
	k, err := e.l.TryAcquire(e.t.Context(), name, opts...)
	if err != nil {
		e.t.Fatalf("arrange: TryAcquire(%q): %v", name, err)
	}
	e.t.Cleanup(func() {
		if !e.wedged {
			_ = k.Release(context.Background())
		}
	})
	return k
}

// locker returns a new Locker on db, closed when the test ends.
func (e *hostileEnv) locker(db *sql.DB, opts ...rowlock.Option) *rowlock.Locker {
	e.t.Helper()
	l, err := rowlock.New(db, opts...)
	if err != nil {
		e.t.Fatalf("arrange: rowlock.New: %v", err)
	}
	e.t.Cleanup(func() {
		if !e.wedged {
			_ = l.Close()
		}
	})
	return l
}

// pool opens a pool on the target's database for this case.
func (e *hostileEnv) pool() *sql.DB {
	e.t.Helper()
	db, err := sql.Open(e.tg.DriverName, e.tg.DSN)
	if err != nil {
		e.t.Fatalf("arrange: open: %v", err)
	}
	db.SetMaxOpenConns(4)
	e.t.Cleanup(func() {
		if !e.wedged {
			_ = db.Close()
		}
	})
	return db
}

// closedDB returns a pool on the target's database that is already closed.
func (e *hostileEnv) closedDB() *sql.DB {
	db := testdb.Open(e.t, e.tg, e.tg.DSN)
	_ = db.Close()
	return db
}

// expire moves name's lease into the past by the database clock.
func (e *hostileEnv) expire(name string) {
	e.t.Helper()
	q := `UPDATE dblock_locks SET expires_at = clock_timestamp() - interval '1 second' WHERE name = $1`
	if e.tg.Dialect == dblock.MySQL {
		q = `UPDATE dblock_locks SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE name = ?`
	}
	if _, err := e.tg.DB.ExecContext(e.t.Context(), q, name); err != nil {
		e.t.Fatalf("arrange: expire %q: %v", name, err)
	}
}

// storedName reads back the name of name's row byte for byte, and fails
// unless there is exactly one row and it matches.
func (e *hostileEnv) storedName(ctx context.Context, name string) error {
	q := `SELECT name FROM dblock_locks WHERE name = $1`
	var arg any = name
	if e.tg.Dialect == dblock.MySQL {
		q, arg = `SELECT name FROM dblock_locks WHERE name = ?`, []byte(name)
	}
	rows, err := e.tg.DB.QueryContext(ctx, q, arg)
	if err != nil {
		return err
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return err
		}
		got = append(got, string(b))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(got) != 1 || got[0] != name {
		return fmt.Errorf("row for %q reads back as %q", name, got)
	}
	return nil
}

// acquireDistinct takes each of names (which must not block on the lock
// the case holds), checks its row carries exactly that name, and releases
// it.
func (e *hostileEnv) acquireDistinct(ctx context.Context, names ...string) error {
	for _, name := range names {
		k, err := e.l.TryAcquire(ctx, name)
		if err != nil {
			return fmt.Errorf("TryAcquire(%q): %w", name, err)
		}
		if k.Name() != name {
			_ = k.Release(ctx)
			return fmt.Errorf("Name() = %q, want %q", k.Name(), name)
		}
		if err := e.storedName(ctx, name); err != nil {
			_ = k.Release(ctx)
			return err
		}
		if err := k.Release(ctx); err != nil {
			return fmt.Errorf("Release(%q): %w", name, err)
		}
	}
	return nil
}

// hostileSnapshot is the rows a case may touch: every lock row (all its
// columns, as text) and the number of waiter rows, per name, for names with
// the case's prefix and the watched names.
type hostileSnapshot struct {
	locks   map[string]string
	waiters map[string]int
}

// storable reports whether the target's name column could hold name; a
// name it cannot hold cannot have been written, and PostgreSQL refuses to
// compare with it.
func storable(d dblock.Dialect, name string) bool {
	if d == dblock.MySQL {
		return len(name) <= 255 // VARBINARY(255)
	}
	return utf8.ValidString(name) && !strings.ContainsRune(name, 0) && utf8.RuneCountInString(name) <= 255
}

func (e *hostileEnv) snapshot() hostileSnapshot {
	e.t.Helper()
	ctx := context.Background()
	var names []string
	for _, n := range e.watched {
		if storable(e.tg.Dialect, n) {
			names = append(names, n)
		}
	}
	s := hostileSnapshot{locks: map[string]string{}, waiters: map[string]int{}}
	var lockQ, waitQ string
	var args []any
	switch e.tg.Dialect {
	case dblock.Postgres:
		lockQ = `SELECT name, concat_ws('|', token, stripe, owner_host, owner_id, hold_count, note,
		             acquired_at, min_hold_until, expires_at)
		         FROM dblock_locks WHERE starts_with(name, $1) OR name = ANY($2)`
		waitQ = `SELECT name, count(*) FROM dblock_waiters
		         WHERE starts_with(name, $1) OR name = ANY($2) GROUP BY name`
		args = []any{e.prefix, names}
	default:
		where := `LEFT(name, ?) = ?`
		args = []any{len(e.prefix), []byte(e.prefix)}
		if len(names) > 0 {
			where += ` OR name IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", ") + `)`
			for _, n := range names {
				args = append(args, []byte(n))
			}
		}
		lockQ = `SELECT name, CONCAT_WS('|', token, stripe, owner_host, HEX(owner_id), hold_count, note,
		             acquired_at, min_hold_until, expires_at)
		         FROM dblock_locks WHERE ` + where
		waitQ = `SELECT name, COUNT(*) FROM dblock_waiters WHERE ` + where + ` GROUP BY name`
	}
	rows, err := e.tg.DB.QueryContext(ctx, lockQ, args...)
	if err != nil {
		e.t.Fatalf("snapshot of dblock_locks: %v", err)
	}
	for rows.Next() {
		var name, row []byte
		if err := rows.Scan(&name, &row); err != nil {
			e.t.Fatalf("snapshot of dblock_locks: %v", err)
		}
		s.locks[string(name)] = string(row)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		e.t.Fatalf("snapshot of dblock_locks: %v", err)
	}
	rows, err = e.tg.DB.QueryContext(ctx, waitQ, args...)
	if err != nil {
		e.t.Fatalf("snapshot of dblock_waiters: %v", err)
	}
	for rows.Next() {
		var name []byte
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			e.t.Fatalf("snapshot of dblock_waiters: %v", err)
		}
		s.waiters[string(name)] = n
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		e.t.Fatalf("snapshot of dblock_waiters: %v", err)
	}
	return s
}

// compare reports rows that changed, other than those of names the call
// may write.
func (e *hostileEnv) compare(before, after hostileSnapshot) {
	e.t.Helper()
	short := func(s string) string {
		if len(s) > 60 {
			return fmt.Sprintf("%q... (%d bytes)", s[:60], len(s))
		}
		return fmt.Sprintf("%q", s)
	}
	for _, name := range hostileKeys(before.locks, after.locks) {
		if slices.Contains(e.writes, name) {
			continue
		}
		b, inB := before.locks[name]
		a, inA := after.locks[name]
		if inB != inA || a != b {
			e.t.Errorf("dblock_locks row %s changed:\n\tbefore %q (exists %v)\n\tafter  %q (exists %v)", short(name), b, inB, a, inA)
		}
	}
	for _, name := range hostileKeys(before.waiters, after.waiters) {
		if slices.Contains(e.writes, name) {
			continue
		}
		if before.waiters[name] != after.waiters[name] {
			e.t.Errorf("dblock_waiters rows of %s: %d before, %d after", short(name), before.waiters[name], after.waiters[name])
		}
	}
}

func hostileKeys[V any](maps ...map[string]V) []string {
	var keys []string
	for _, m := range maps {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// callNoPanic runs call and turns a panic into a test failure, so one
// panicking case neither kills the test binary nor hides the others.
func callNoPanic(t *testing.T, ctx context.Context, call func(context.Context) error) (panicked bool, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("PANIC: %v\n%s", r, debug.Stack())
			panicked, err = true, nil
		}
	}()
	return false, call(ctx)
}

// hostileConnector is a database/sql driver sqllock has never heard of.
type hostileConnector struct{}

func (hostileConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("hostile driver: no server")
}
func (hostileConnector) Driver() driver.Driver { return hostileDriver{} }

type hostileDriver struct{}

func (hostileDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("hostile driver: no server")
}

// hostileEmptyDB returns a pool whose default schema (PostgreSQL) or
// database (MySQL) has none of sqllock's tables.
func hostileEmptyDB(t *testing.T, tg testdb.Target) *sql.DB {
	t.Helper()
	const empty = "sqllock_hostile_empty"
	switch tg.Dialect {
	case dblock.Postgres:
		if _, err := tg.DB.ExecContext(t.Context(), `CREATE SCHEMA IF NOT EXISTS `+empty); err != nil {
			t.Fatal(err)
		}
		sep := "?"
		if strings.Contains(tg.DSN, "?") {
			sep = "&"
		}
		return testdb.Open(t, tg, tg.DSN+sep+"search_path="+empty)
	default:
		if _, err := tg.DB.ExecContext(t.Context(), `CREATE DATABASE IF NOT EXISTS `+empty); err != nil {
			t.Fatal(err)
		}
		slash := strings.LastIndex(tg.DSN, "/")
		params := ""
		if q := strings.Index(tg.DSN[slash:], "?"); q >= 0 {
			params = tg.DSN[slash+q:]
		}
		return testdb.Open(t, tg, tg.DSN[:slash+1]+empty+params)
	}
}

// exactLength returns prefix followed by ASCII filler and emoji, total
// bytes long, the last emoji ending exactly at the end.
func exactLength(prefix string, total int) string {
	const emoji = "😀" // 4 bytes
	room := total - len(prefix)
	return prefix + strings.Repeat("x", room%4) + strings.Repeat(emoji, room/4)
}

func TestHostileInput(t *testing.T) {
	// Built once: 10 MB is expensive to make per case.
	tenMB := strings.Repeat("x", 10<<20)
	var nilCtx context.Context // a nil interface, as a caller's bug passes it

	// Cases that only need a name: the call is a TryAcquire or an Acquire.
	try := func(name func(e *hostileEnv) string, opts ...dblock.Option) func(e *hostileEnv) func(context.Context) error {
		return func(e *hostileEnv) func(context.Context) error {
			n := name(e)
			e.watch(n)
			return func(ctx context.Context) error {
				k, err := e.l.TryAcquire(ctx, n, opts...)
				if k != nil {
					_ = k.Release(context.Background())
					return fmt.Errorf("got a lock (and err %v)", err)
				}
				return err
			}
		}
	}
	acquire := func(name func(e *hostileEnv) string, opts ...dblock.Option) func(e *hostileEnv) func(context.Context) error {
		return func(e *hostileEnv) func(context.Context) error {
			n := name(e)
			e.watch(n)
			return func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, 2*time.Second) // a bound against hangs
				defer cancel()
				k, err := e.l.Acquire(ctx, n, opts...)
				if k != nil {
					_ = k.Release(context.Background())
					return fmt.Errorf("got a lock (and err %v)", err)
				}
				return err
			}
		}
	}
	named := func(suffix string) func(e *hostileEnv) string {
		return func(e *hostileEnv) string { return e.n(suffix) }
	}
	global := func(name string) func(e *hostileEnv) string {
		return func(*hostileEnv) string { return name }
	}
	// withCtx replaces the test's context given to the call.
	withCtx := func(mk func(context.Context) context.Context, arrange func(e *hostileEnv) func(context.Context) error) func(e *hostileEnv) func(context.Context) error {
		return func(e *hostileEnv) func(context.Context) error {
			call := arrange(e)
			return func(ctx context.Context) error { return call(mk(ctx)) }
		}
	}
	canceled := func(ctx context.Context) context.Context {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		return ctx
	}
	pastDeadline := func(ctx context.Context) context.Context {
		ctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
		cancel() // done already: its error stays DeadlineExceeded
		return ctx
	}
	owner := func(id string) func(context.Context) context.Context {
		return func(ctx context.Context) context.Context { return dblock.WithOwner(ctx, id) }
	}
	// legal acquires names that must work and not disturb the held one.
	legal := func(held string, others ...string) func(e *hostileEnv) func(context.Context) error {
		return func(e *hostileEnv) func(context.Context) error {
			e.hold(e.n(held))
			e.watch(e.n(held))
			var names []string
			for _, o := range others {
				names = append(names, e.n(o))
			}
			e.mayWrite(names...)
			return func(ctx context.Context) error { return e.acquireDistinct(ctx, names...) }
		}
	}
	// onHeld holds a lock of the case, lets prep act on it, and returns
	// the call made with the handle.
	onHeld := func(prep func(e *hostileEnv, k dblock.Lock), call func(e *hostileEnv, k dblock.Lock, ctx context.Context) error) func(e *hostileEnv) func(context.Context) error {
		return func(e *hostileEnv) func(context.Context) error {
			name := e.n("held")
			k := e.hold(name)
			e.watch(name)
			if prep != nil {
				prep(e, k)
			}
			return func(ctx context.Context) error { return call(e, k, ctx) }
		}
	}
	released := func(e *hostileEnv, k dblock.Lock) {
		if err := k.Release(e.t.Context()); err != nil {
			e.t.Fatalf("arrange: first Release: %v", err)
		}
	}
	// takenOver lets another owner take the lock over after its lease
	// lapsed, as after a long pause of the holder.
	takenOver := func(e *hostileEnv, k dblock.Lock) {
		e.expire(k.Name())
		e.hold(k.Name())
	}
	stillHeld := func(e *hostileEnv, k dblock.Lock) {
		e.andThen(func() {
			if err := k.Err(); err != nil {
				e.t.Errorf("after the refused call the lock is no longer held: %v", err)
			}
			if err := k.Release(e.t.Context()); err != nil {
				e.t.Errorf("after the refused call, Release: %v", err)
			}
		})
	}
	withLocker := func(mk func(e *hostileEnv) *rowlock.Locker, call func(l *rowlock.Locker, name string, ctx context.Context) error) func(e *hostileEnv) func(context.Context) error {
		return func(e *hostileEnv) func(context.Context) error {
			l := mk(e)
			name := e.n("x")
			e.watch(name)
			return func(ctx context.Context) error { return call(l, name, ctx) }
		}
	}
	tryOn := func(l *rowlock.Locker, name string, ctx context.Context) error {
		k, err := l.TryAcquire(ctx, name)
		if k != nil {
			_ = k.Release(context.Background())
			return fmt.Errorf("got a lock (and err %v)", err)
		}
		return err
	}
	acquireOn := func(opts ...dblock.Option) func(l *rowlock.Locker, name string, ctx context.Context) error {
		return func(l *rowlock.Locker, name string, ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			k, err := l.Acquire(ctx, name, opts...)
			if k != nil {
				_ = k.Release(context.Background())
				return fmt.Errorf("got a lock (and err %v)", err)
			}
			return err
		}
	}
	waitersOn := func(l *rowlock.Locker, name string, ctx context.Context) error {
		_, err := l.Waiters(ctx, name)
		return err
	}
	sweepOn := func(l *rowlock.Locker, _ string, ctx context.Context) error {
		// A grace no row of any test reaches: a sweep that runs deletes
		// nothing.
		_, _, err := l.Sweep(ctx, 1000*time.Hour, 1, "")
		return err
	}
	// newWith calls rowlock.New with opts; if it wrongly succeeds, the
	// Locker must still refuse to lock.
	newWith := func(db func(e *hostileEnv) *sql.DB, opts ...rowlock.Option) func(e *hostileEnv) func(context.Context) error {
		return func(e *hostileEnv) func(context.Context) error {
			pool := db(e)
			name := e.n("x")
			e.watch(name)
			return func(ctx context.Context) error {
				l, err := rowlock.New(pool, opts...)
				if err != nil {
					if l != nil {
						return fmt.Errorf("New returned a Locker with its error %v", err)
					}
					return err
				}
				defer l.Close()
				return tryOn(l, name, ctx)
			}
		}
	}
	sharedDB := func(e *hostileEnv) *sql.DB { return e.db }
	otherDialect := func(e *hostileEnv) rowlock.Option {
		if e.tg.Dialect == dblock.Postgres {
			return rowlock.WithDialect(dblock.MySQL)
		}
		return rowlock.WithDialect(dblock.Postgres)
	}

	cases := []hostileCase{
		// Names.
		{name: "empty name", want: []error{dblock.ErrInvalidName}, arrange: try(global(""))},
		{name: "empty name, Acquire", want: []error{dblock.ErrInvalidName}, arrange: acquire(global(""))},
		{name: "name of 256 bytes", want: []error{dblock.ErrInvalidName},
			arrange: try(func(e *hostileEnv) string { return e.n(strings.Repeat("n", 256-len(e.prefix))) })},
		{name: "name of 10 MB", want: []error{dblock.ErrInvalidName},
			arrange: try(func(e *hostileEnv) string { return e.prefix + tenMB })},
		{name: "name of 10 MB, Acquire", want: []error{dblock.ErrInvalidName},
			arrange: acquire(func(e *hostileEnv) string { return e.prefix + tenMB })},
		{name: "name not UTF-8", want: []error{dblock.ErrInvalidName}, arrange: try(named("\xff\xfe"))},
		{name: "name with a lone surrogate", want: []error{dblock.ErrInvalidName}, arrange: try(named("\xed\xa0\x80"))},
		{name: "name with an overlong NUL", want: []error{dblock.ErrInvalidName}, arrange: try(named("\xc0\x80"))},
		{name: "name with NUL", want: []error{dblock.ErrInvalidName}, arrange: try(named("a\x00b"))},
		{name: "name cut inside a rune at 255 bytes", want: []error{dblock.ErrInvalidName},
			arrange: try(func(e *hostileEnv) string { return exactLength(e.prefix, 256)[:255] })},
		{name: "emoji name of 256 bytes", want: []error{dblock.ErrInvalidName},
			arrange: try(func(e *hostileEnv) string { return exactLength(e.prefix, 256) })},
		{name: "emoji name of 255 bytes is accepted", arrange: func(e *hostileEnv) func(context.Context) error {
			name := exactLength(e.prefix, 255)
			e.mayWrite(name)
			return func(ctx context.Context) error { return e.acquireDistinct(ctx, name) }
		}},
		{name: "name that looks like SQL is just a name", arrange: func(e *hostileEnv) func(context.Context) error {
			name := e.n("'; DROP TABLE dblock_locks; --")
			quoted := e.n(`"; DELETE FROM dblock_locks WHERE '1'='1`)
			e.mayWrite(name, quoted)
			// The snapshot after the call reads dblock_locks: it is still there.
			return func(ctx context.Context) error { return e.acquireDistinct(ctx, name, quoted) }
		}},
		{name: "LIKE wildcards are literal", arrange: legal("%", "_", "ab", "%%", `\%`)},
		{name: "backslashes are literal", arrange: legal(`\`, `\\`, `\\\\`, `\'`, `\0`)},
		{name: "names differing in case are different locks", arrange: legal("a", "A")},
		{name: "trailing space makes a different lock", arrange: legal("a", "a ", "a\t", "a\n")},
		{name: "leading space makes a different lock", arrange: legal("a", " a")},
		{name: "composed and decomposed accents are different locks", arrange: legal("\u00e9", "e\u0301")},
		{name: "SQL-looking name is refused as a held lock's twin", want: []error{dblock.ErrNotAcquired},
			arrange: func(e *hostileEnv) func(context.Context) error {
				name := e.n("' OR '1'='1")
				e.hold(name)
				e.watch(name)
				return try(global(name))(e)
			}},

		// Acquisition options.
		{name: "TTL 0", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), dblock.TTL(0))},
		{name: "TTL negative", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), dblock.TTL(-time.Second))},
		{name: "TTL most negative", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), dblock.TTL(math.MinInt64))},
		{name: "TTL below MinTTL", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), dblock.TTL(dblock.MinTTL-1))},
		{name: "TTL below MinTTL, Acquire", want: []error{dblock.ErrInvalidOption}, arrange: acquire(named("x"), dblock.TTL(time.Millisecond))},
		{name: "MinHold negative", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), dblock.MinHold(-time.Nanosecond))},
		{name: "note too long", want: []error{dblock.ErrInvalidOption},
			arrange: try(named("x"), dblock.Note(strings.Repeat("n", dblock.MaxNoteLength+1)))},
		{name: "note not UTF-8", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), dblock.Note("bad\xffnote"))},
		{name: "note with NUL", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), dblock.Note("nul\x00note"))},
		{name: "nil option", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), nil)},
		{name: "nil option among good ones, Acquire", want: []error{dblock.ErrInvalidOption},
			arrange: acquire(named("x"), dblock.TTL(time.Second), nil, dblock.Fair())},
		{name: "bad option with a bad name reports the name", want: []error{dblock.ErrInvalidName},
			arrange: try(global(""), dblock.TTL(-1))},
		{name: "longest TTL is accepted", arrange: func(e *hostileEnv) func(context.Context) error {
			name := e.n("x")
			e.mayWrite(name)
			return func(ctx context.Context) error {
				k, err := e.l.TryAcquire(ctx, name, dblock.TTL(math.MaxInt64))
				if err != nil {
					return err
				}
				return k.Release(ctx)
			}
		}},

		// Owners.
		{name: "owner id empty", want: []error{dblock.ErrInvalidOption}, arrange: withCtx(owner(""), try(named("x")))},
		{name: "owner id too long", want: []error{dblock.ErrInvalidOption},
			arrange: withCtx(owner(strings.Repeat("o", dblock.MaxOwnerIDLength+1)), try(named("x")))},
		{name: "owner id not UTF-8", want: []error{dblock.ErrInvalidOption}, arrange: withCtx(owner("bad\xffowner"), try(named("x")))},
		{name: "owner id with NUL", want: []error{dblock.ErrInvalidOption}, arrange: withCtx(owner("nul\x00owner"), try(named("x")))},
		{name: "owner id empty, Acquire", want: []error{dblock.ErrInvalidOption}, arrange: withCtx(owner(""), acquire(named("x")))},
		{name: "owner host empty", want: []error{dblock.ErrInvalidOption},
			arrange: withCtx(func(ctx context.Context) context.Context {
				return dblock.ContextWithOwner(ctx, dblock.Owner{ID: "someone"})
			}, try(named("x")))},
		{name: "another owner's held lock", want: []error{dblock.ErrNotAcquired},
			arrange: onHeld(nil, func(e *hostileEnv, k dblock.Lock, ctx context.Context) error {
				return try(global(k.Name()))(e)(ctx)
			})},

		// Contexts.
		{name: "nil context, TryAcquire", want: []error{dblock.ErrInvalidOption}, arrange: withCtx(func(context.Context) context.Context { return nilCtx }, try(named("x")))},
		{name: "nil context, Acquire", want: []error{dblock.ErrInvalidOption},
			arrange: func(e *hostileEnv) func(context.Context) error {
				name := e.n("x")
				e.watch(name)
				return func(context.Context) error {
					k, err := e.l.Acquire(nilCtx, name)
					if k != nil {
						_ = k.Release(context.Background())
						return errors.New("got a lock")
					}
					return err
				}
			}},
		{name: "nil context, Release", want: []error{dblock.ErrInvalidOption},
			arrange: onHeld(stillHeld, func(_ *hostileEnv, k dblock.Lock, _ context.Context) error { return k.Release(nilCtx) })},
		{name: "nil context, Refresh", want: []error{dblock.ErrInvalidOption},
			arrange: onHeld(stillHeld, func(_ *hostileEnv, k dblock.Lock, _ context.Context) error { return k.Refresh(nilCtx) })},
		{name: "nil context, CheckHeld", want: []error{dblock.ErrInvalidOption},
			arrange: onHeld(stillHeld, func(e *hostileEnv, k dblock.Lock, ctx context.Context) error {
				tx, err := e.db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				return k.(dblock.Fencer).CheckHeld(nilCtx, tx)
			})},
		{name: "nil context, Waiters", want: []error{dblock.ErrInvalidOption},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.l }, func(l *rowlock.Locker, name string, _ context.Context) error {
				_, err := l.Waiters(nilCtx, name)
				return err
			})},
		{name: "nil context, Sweep", want: []error{dblock.ErrInvalidOption},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.l }, func(l *rowlock.Locker, name string, _ context.Context) error {
				return sweepOn(l, name, nilCtx)
			})},
		{name: "canceled context, TryAcquire", want: []error{dblock.ErrNotAcquired, context.Canceled}, arrange: withCtx(canceled, try(named("x")))},
		{name: "canceled context, fair Acquire", want: []error{dblock.ErrNotAcquired, context.Canceled},
			arrange: withCtx(canceled, acquire(named("x"), dblock.Fair()))},
		{name: "canceled context on a held lock, fair Acquire", want: []error{dblock.ErrNotAcquired, context.Canceled},
			arrange: onHeld(nil, func(e *hostileEnv, k dblock.Lock, ctx context.Context) error {
				return acquire(global(k.Name()), dblock.Fair())(e)(canceled(ctx))
			})},
		{name: "deadline passed, TryAcquire", want: []error{dblock.ErrNotAcquired, context.DeadlineExceeded},
			arrange: withCtx(pastDeadline, try(named("x")))},
		{name: "deadline passed, Acquire", want: []error{dblock.ErrNotAcquired, context.DeadlineExceeded},
			arrange: withCtx(pastDeadline, acquire(named("x")))},
		{name: "deadline passes while queued, fair Acquire leaves no waiter", want: []error{dblock.ErrNotAcquired, context.DeadlineExceeded},
			arrange: onHeld(nil, func(e *hostileEnv, k dblock.Lock, ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
				got, err := e.l.Acquire(ctx, k.Name(), dblock.Fair())
				if got != nil {
					_ = got.Release(context.Background())
					return errors.New("got a held lock")
				}
				return err
			})},
		{name: "canceled context, Waiters", want: []error{context.Canceled},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.l }, func(l *rowlock.Locker, name string, ctx context.Context) error {
				return waitersOn(l, name, canceled(ctx))
			})},

		// Database handles.
		{name: "New(nil)", want: []error{dblock.ErrInvalidDB}, arrange: newWith(func(*hostileEnv) *sql.DB { return nil })},
		{name: "New(nil) with a dialect", want: []error{dblock.ErrInvalidDB},
			arrange: newWith(func(*hostileEnv) *sql.DB { return nil }, rowlock.WithDialect(dblock.Postgres))},
		{name: "New with a nil Option", want: []error{dblock.ErrInvalidOption}, arrange: newWith(sharedDB, nil)},
		{name: "New with dialect oracle", want: []error{dblock.ErrUnknownDialect}, arrange: newWith(sharedDB, rowlock.WithDialect("oracle"))},
		{name: "New with an empty dialect on an unknown driver", want: []error{dblock.ErrUnknownDialect},
			arrange: newWith(func(e *hostileEnv) *sql.DB {
				db := sql.OpenDB(hostileConnector{})
				e.t.Cleanup(func() { _ = db.Close() })
				return db
			})},
		{name: "New with the other dialect", want: []error{dblock.ErrUnknownDialect},
			arrange: func(e *hostileEnv) func(context.Context) error { return newWith(sharedDB, otherDialect(e))(e) }},
		{name: "New with a nil logger", want: []error{dblock.ErrInvalidOption}, arrange: newWith(sharedDB, rowlock.WithLogger(nil))},
		{name: "New with a zero poll interval", want: []error{dblock.ErrInvalidOption},
			arrange: newWith(sharedDB, rowlock.WithPollInterval(0, time.Second))},
		{name: "New with an inverted poll interval", want: []error{dblock.ErrInvalidOption},
			arrange: newWith(sharedDB, rowlock.WithPollInterval(2*time.Second, time.Second))},
		{name: "New with a negative listener idle", want: []error{dblock.ErrInvalidOption},
			arrange: newWith(sharedDB, rowlock.WithListenerIdle(-time.Second))},
		{name: "New with a zero waiter TTL", want: []error{dblock.ErrInvalidOption}, arrange: newWith(sharedDB, rowlock.WithWaiterTTL(0))},
		{name: "closed *sql.DB, TryAcquire", want: []error{dblock.ErrInvalidDB},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.locker(e.closedDB()) }, tryOn)},
		{name: "closed *sql.DB, fair Acquire", want: []error{dblock.ErrInvalidDB},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.locker(e.closedDB()) }, acquireOn(dblock.Fair()))},
		{name: "closed *sql.DB, Waiters", want: []error{dblock.ErrInvalidDB},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.locker(e.closedDB()) }, waitersOn)},
		{name: "closed *sql.DB, Sweep", want: []error{dblock.ErrInvalidDB},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.locker(e.closedDB()) }, sweepOn)},
		{name: "closed *sql.DB, Release and Refresh", want: []error{dblock.ErrInvalidDB},
			arrange: func(e *hostileEnv) func(context.Context) error {
				db := testdb.Open(e.t, e.tg, e.tg.DSN)
				l := e.locker(db)
				name := e.n("held")
				k, err := l.TryAcquire(e.t.Context(), name)
				if err != nil {
					e.t.Fatalf("arrange: %v", err)
				}
				e.watch(name)
				_ = db.Close()
				e.t.Cleanup(func() { _ = k.Release(context.Background()) })
				return func(ctx context.Context) error {
					refreshErr := k.Refresh(ctx)
					if !errors.Is(refreshErr, dblock.ErrInvalidDB) {
						return fmt.Errorf("Refresh: %w", refreshErr)
					}
					return k.Release(ctx)
				}
			}},
		{name: "wrong dialect, TryAcquire", want: []error{dblock.ErrUnknownDialect},
			arrange: func(e *hostileEnv) func(context.Context) error {
				// Built outside New's check, should New let it through.
				return newWith(sharedDB, otherDialect(e), rowlock.WithListen(false))(e)
			}},

		// Missing tables.
		{name: "missing tables, TryAcquire", want: []error{dblock.ErrSchemaMissing}, msg: "migrations.Up",
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.locker(hostileEmptyDB(e.t, e.tg)) }, tryOn)},
		{name: "missing tables, fair Acquire", want: []error{dblock.ErrSchemaMissing}, msg: "migrations.Up",
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.locker(hostileEmptyDB(e.t, e.tg)) }, acquireOn(dblock.Fair()))},
		{name: "missing tables, Waiters", want: []error{dblock.ErrSchemaMissing}, msg: "migrations.Up",
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.locker(hostileEmptyDB(e.t, e.tg)) }, waitersOn)},
		{name: "missing tables, Sweep", want: []error{dblock.ErrSchemaMissing}, msg: "migrations.Up",
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.locker(hostileEmptyDB(e.t, e.tg)) }, sweepOn)},

		// Lock handles.
		{name: "double Release", want: []error{dblock.ErrNotHeld},
			arrange: onHeld(released, func(_ *hostileEnv, k dblock.Lock, ctx context.Context) error { return k.Release(ctx) })},
		{name: "Refresh after Release", want: []error{dblock.ErrNotHeld},
			arrange: onHeld(released, func(_ *hostileEnv, k dblock.Lock, ctx context.Context) error { return k.Refresh(ctx) })},
		{name: "CheckHeld after Release", want: []error{dblock.ErrLockLost},
			arrange: onHeld(released, func(e *hostileEnv, k dblock.Lock, ctx context.Context) error {
				tx, err := e.db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				return k.(dblock.Fencer).CheckHeld(ctx, tx)
			})},
		{name: "double Release of one reentrant hold keeps the other", want: []error{dblock.ErrNotHeld},
			arrange: func(e *hostileEnv) func(context.Context) error {
				name := e.n("held")
				e.watch(name)
				oc := dblock.WithOwner(e.t.Context(), "hostile-"+hostileRandom())
				first, err := e.l.TryAcquire(oc, name)
				if err != nil {
					e.t.Fatalf("arrange: %v", err)
				}
				second, err := e.l.TryAcquire(oc, name)
				if err != nil {
					e.t.Fatalf("arrange: re-enter: %v", err)
				}
				e.t.Cleanup(func() {
					if !e.wedged {
						_ = second.Release(context.Background())
					}
				})
				if err := first.Release(oc); err != nil {
					e.t.Fatalf("arrange: first Release: %v", err)
				}
				stillHeld(e, second)
				return func(ctx context.Context) error { return first.Release(ctx) }
			}},
		{name: "Release by a former holder after a takeover", want: []error{dblock.ErrLockLost},
			arrange: onHeld(takenOver, func(_ *hostileEnv, k dblock.Lock, ctx context.Context) error { return k.Release(ctx) })},
		{name: "Refresh by a former holder after a takeover", want: []error{dblock.ErrLockLost},
			arrange: onHeld(takenOver, func(_ *hostileEnv, k dblock.Lock, ctx context.Context) error { return k.Refresh(ctx) })},
		{name: "CheckHeld by a former holder after a takeover", want: []error{dblock.ErrLockLost},
			arrange: onHeld(takenOver, func(e *hostileEnv, k dblock.Lock, ctx context.Context) error {
				tx, err := e.db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				return k.(dblock.Fencer).CheckHeld(ctx, tx)
			})},
		{name: "CheckHeld with a nil tx", want: []error{dblock.ErrInvalidOption},
			arrange: onHeld(stillHeld, func(_ *hostileEnv, k dblock.Lock, ctx context.Context) error {
				return k.(dblock.Fencer).CheckHeld(ctx, nil)
			})},
		{name: "CheckHeld with a finished tx", want: []error{sql.ErrTxDone},
			arrange: onHeld(stillHeld, func(e *hostileEnv, k dblock.Lock, ctx context.Context) error {
				tx, err := e.db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				if err := tx.Rollback(); err != nil {
					return err
				}
				return k.(dblock.Fencer).CheckHeld(ctx, tx)
			})},
		{name: "Sweep with a negative grace", want: []error{dblock.ErrInvalidOption},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.l }, func(l *rowlock.Locker, _ string, ctx context.Context) error {
				_, _, err := l.Sweep(ctx, -time.Second, 1, "")
				return err
			})},
		{name: "Sweep with limit 0", want: []error{dblock.ErrInvalidOption},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.l }, func(l *rowlock.Locker, _ string, ctx context.Context) error {
				_, _, err := l.Sweep(ctx, 0, 0, "")
				return err
			})},
		{name: "Sweep with a negative limit", want: []error{dblock.ErrInvalidOption},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.l }, func(l *rowlock.Locker, _ string, ctx context.Context) error {
				_, _, err := l.Sweep(ctx, 0, math.MinInt, "")
				return err
			})},
		{name: "Sweep from a position no name can have", want: []error{dblock.ErrInvalidOption},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.l }, func(l *rowlock.Locker, _ string, ctx context.Context) error {
				_, _, err := l.Sweep(ctx, 0, 1, strings.Repeat("z", dblock.MaxNameLength+1))
				return err
			})},
		{name: "Sweep with a limit over MaxSweepBatch", want: []error{dblock.ErrInvalidOption},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.l }, func(l *rowlock.Locker, _ string, ctx context.Context) error {
				_, _, err := l.Sweep(ctx, 0, rowlock.MaxSweepBatch+1, "")
				return err
			})},

		// A closed Locker.
		{name: "closed Locker, TryAcquire", want: []error{dblock.ErrClosed},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { l := e.locker(e.db); _ = l.Close(); return l }, tryOn)},
		{name: "closed Locker, fair Acquire", want: []error{dblock.ErrClosed},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { l := e.locker(e.db); _ = l.Close(); return l }, acquireOn(dblock.Fair()))},
		{name: "closed twice, Acquire", want: []error{dblock.ErrClosed},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker {
				l := e.locker(e.db)
				_, _ = l.Close(), l.Close()
				return l
			}, acquireOn())},

		// Waiters.
		{name: "Waiters of the empty name", want: []error{dblock.ErrInvalidName},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.l }, func(l *rowlock.Locker, _ string, ctx context.Context) error {
				return waitersOn(l, "", ctx)
			})},
		{name: "Waiters of a name not UTF-8", want: []error{dblock.ErrInvalidName},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.l }, func(l *rowlock.Locker, name string, ctx context.Context) error {
				return waitersOn(l, name+"\xff", ctx)
			})},
		{name: "Waiters of a name of 10 MB", want: []error{dblock.ErrInvalidName},
			arrange: withLocker(func(e *hostileEnv) *rowlock.Locker { return e.l }, func(l *rowlock.Locker, name string, ctx context.Context) error {
				return waitersOn(l, name+tenMB, ctx)
			})},
	}

	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("PANIC outside the call: %v\n%s", r, debug.Stack())
						}
					}()
					e := &hostileEnv{t: t, tg: tg, prefix: testdb.Name(t) + "/"}
					e.db = e.pool()
					e.l = e.locker(e.db)
					call := c.arrange(e)
					before := e.snapshot()
					panicked, err := callNoPanic(t, t.Context(), call)
					e.wedged = panicked
					after := e.snapshot()
					e.compare(before, after)
					if panicked {
						return
					}
					if len(c.want) == 0 && err != nil {
						t.Errorf("error %v, want success", err)
					}
					for _, w := range c.want {
						if !errors.Is(err, w) {
							t.Errorf("error %v, want one wrapping %v", err, w)
						}
					}
					if err != nil && len(err.Error()) > hostileMaxMessage {
						t.Errorf("error message of %d bytes: %.200q...", len(err.Error()), err.Error())
					}
					if c.msg != "" && (err == nil || !strings.Contains(err.Error(), c.msg)) {
						t.Errorf("error %v does not say %q", err, c.msg)
					}
					if !t.Failed() {
						for _, fn := range e.then {
							fn()
						}
					}
				})
			}
		})
	}
}

func hostileRandom() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
