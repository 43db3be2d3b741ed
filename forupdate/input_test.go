package forupdate_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
)

// The standard here is rowlock's hostile-input test: every bad input gets
// a typed error, changes nothing in any forupdate table (lock rows and
// token counter alike), takes no connection for good, and panics nowhere.
// The cases run on tables of their own (created like the migrated ones,
// dropped at the end), so that the whole of each table, and the token
// counter, which every name shares, can be compared before and after.

// hostileMaxMessage bounds what an error may echo of its input: a 10 MB
// name must not come back as a 10 MB error message.
const hostileMaxMessage = 1024

// hostileCase is one hostile or mistaken input. arrange prepares what the
// input needs (locks held, pools closed) and returns the call to make; the
// runner snapshots the tables around that call.
type hostileCase struct {
	name string
	// want lists sentinels the error must wrap (errors.Is); empty means
	// the call must succeed (inputs that look hostile but are legal).
	want []error
	// msg, when set, must appear in the error text.
	msg     string
	arrange func(e *hostileEnv) func(ctx context.Context) error
}

// hostileTables are the tables one target's cases run on.
type hostileTables struct {
	locks, counter string
}

// hostileEnv is what one case runs against.
type hostileEnv struct {
	t      *testing.T
	tg     testdb.Target
	tables hostileTables
	// db and l are the case's own pool and Locker: a call that panics
	// inside database/sql can leave a pool's mutex locked for good, and
	// must not take the other cases down with it.
	db     *sql.DB
	l      *forupdate.Locker
	prefix string // every name the case makes starts with it
	// wedged is set when the call panicked: clean-ups that would use the
	// case's pool are skipped (they could block forever).
	wedged bool
	// writes are the names the call may write (a legal name acquired);
	// when there are any, the call may draw tokens too.
	writes []string
	// then runs after the snapshots were compared: checks that need to
	// change rows (the handle still works after a refused call).
	then []func()
}

// n returns a name of this case: the prefix plus suffix.
func (e *hostileEnv) n(suffix string) string { return e.prefix + suffix }

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

// locker returns a Locker on db and the case's tables; opts come after
// the table, so they may name another.
func (e *hostileEnv) locker(db *sql.DB, opts ...forupdate.Option) *forupdate.Locker {
	e.t.Helper()
	l, err := forupdate.New(db, append([]forupdate.Option{forupdate.WithTable(e.tables.locks)}, opts...)...)
	if err != nil {
		e.t.Fatalf("arrange: forupdate.New: %v", err)
	}
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

// query rewrites $1 for MySQL and passes names as bytes there (the name
// columns are VARBINARY).
func (e *hostileEnv) query(q string, name string) (string, any) {
	if e.tg.Dialect == dblock.MySQL {
		return strings.ReplaceAll(q, "$1", "?"), []byte(name)
	}
	return q, name
}

// storedName reads back the name of name's row byte for byte, and fails
// unless there is exactly one row and it matches.
func (e *hostileEnv) storedName(ctx context.Context, name string) error {
	q, arg := e.query(`SELECT name FROM `+e.tables.locks+` WHERE name = $1`, name)
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

// hostileSnapshot is everything forupdate may write for the case's
// tables: every row of the lock table and (MySQL) of the counter table,
// all columns as text, and where the token counter stands.
type hostileSnapshot struct {
	locks, counterRows map[string]string
	counter            string
}

// tableRows reads every row of table, keyed by name.
func (e *hostileEnv) tableRows(table string) map[string]string {
	e.t.Helper()
	rows, err := e.tg.DB.QueryContext(context.Background(), `SELECT * FROM `+table)
	if err != nil {
		e.t.Fatalf("snapshot of %s: %v", table, err)
	}
	cols, err := rows.Columns()
	if err != nil {
		e.t.Fatalf("snapshot of %s: %v", table, err)
	}
	out := map[string]string{}
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			e.t.Fatalf("snapshot of %s: %v", table, err)
		}
		var row []string
		var name string
		for i, v := range vals {
			row = append(row, fmt.Sprintf("%s=%q(%v)", cols[i], v.String, v.Valid))
			if cols[i] == "name" {
				name = v.String
			}
		}
		out[name] = strings.Join(row, " ")
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		e.t.Fatalf("snapshot of %s: %v", table, err)
	}
	return out
}

var autoIncrement = regexp.MustCompile(`AUTO_INCREMENT=(\d+)`)

func (e *hostileEnv) snapshot() hostileSnapshot {
	e.t.Helper()
	ctx := context.Background()
	s := hostileSnapshot{locks: e.tableRows(e.tables.locks), counterRows: map[string]string{}}
	switch e.tg.Dialect {
	case dblock.Postgres:
		var last int64
		var called bool
		if err := e.tg.DB.QueryRowContext(ctx, `SELECT last_value, is_called FROM `+e.tables.counter).Scan(&last, &called); err != nil {
			e.t.Fatalf("snapshot of %s: %v", e.tables.counter, err)
		}
		s.counter = fmt.Sprintf("last_value %d, is_called %v", last, called)
	default:
		s.counterRows = e.tableRows(e.tables.counter)
		// SHOW CREATE TABLE reads the live counter (information_schema
		// may show a cached one on MySQL 8.0); no AUTO_INCREMENT clause
		// means it has not moved from 1.
		var table, ddl string
		if err := e.tg.DB.QueryRowContext(ctx, `SHOW CREATE TABLE `+e.tables.counter).Scan(&table, &ddl); err != nil {
			e.t.Fatalf("snapshot of %s: %v", e.tables.counter, err)
		}
		s.counter = "AUTO_INCREMENT=1"
		if m := autoIncrement.FindString(ddl); m != "" {
			s.counter = m
		}
	}
	return s
}

// compare reports what changed, other than the rows of names the call may
// write and, when it may write, the counter.
func (e *hostileEnv) compare(before, after hostileSnapshot) {
	e.t.Helper()
	short := func(s string) string {
		if len(s) > 60 {
			return fmt.Sprintf("%q... (%d bytes)", s[:60], len(s))
		}
		return fmt.Sprintf("%q", s)
	}
	for _, table := range []struct {
		name          string
		before, after map[string]string
	}{{e.tables.locks, before.locks, after.locks}, {e.tables.counter, before.counterRows, after.counterRows}} {
		for _, name := range hostileKeys(table.before, table.after) {
			if slices.Contains(e.writes, name) {
				continue
			}
			b, inB := table.before[name]
			a, inA := table.after[name]
			if inB != inA || a != b {
				e.t.Errorf("%s row %s changed:\n\tbefore %q (exists %v)\n\tafter  %q (exists %v)", table.name, short(name), b, inB, a, inA)
			}
		}
	}
	if len(e.writes) == 0 && before.counter != after.counter {
		e.t.Errorf("token counter %s moved: %s before, %s after", e.tables.counter, before.counter, after.counter)
	}
}

func hostileKeys(maps ...map[string]string) []string {
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

// exactLength returns prefix followed by ASCII filler and emoji, total
// bytes long, the last emoji ending exactly at the end.
func exactLength(prefix string, total int) string {
	const emoji = "😀" // 4 bytes
	room := total - len(prefix)
	return prefix + strings.Repeat("x", room%4) + strings.Repeat(emoji, room/4)
}

func hostileRandom() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// createHostileTables makes a lock table and token counter shaped like
// the migrated ones, dropped when the test ends; noCounter leaves the
// counter out.
func createHostileTables(t *testing.T, tg testdb.Target, noCounter bool) hostileTables {
	t.Helper()
	ctx := context.Background()
	tb := hostileTables{locks: "fu_hostile_" + hostileRandom()}
	tb.counter = tb.locks + forupdate.CounterSuffix
	ddl := []string{`CREATE TABLE ` + tb.locks + ` (LIKE ` + forupdate.DefaultTable + ` INCLUDING ALL)`}
	drop := []string{`DROP TABLE IF EXISTS ` + tb.locks}
	if !noCounter {
		ddl = append(ddl, `CREATE SEQUENCE `+tb.counter+` AS bigint`)
		drop = append(drop, `DROP SEQUENCE IF EXISTS `+tb.counter)
	}
	if tg.Dialect == dblock.MySQL {
		ddl = []string{`CREATE TABLE ` + tb.locks + ` LIKE ` + forupdate.DefaultTable}
		if !noCounter {
			ddl = append(ddl, `CREATE TABLE `+tb.counter+` LIKE `+forupdate.DefaultTable+forupdate.CounterSuffix)
			drop = append(drop, `DROP TABLE IF EXISTS `+tb.counter)
		}
	}
	t.Cleanup(func() {
		for _, q := range drop {
			if _, err := tg.DB.ExecContext(ctx, q); err != nil {
				t.Errorf("clean-up: %s: %v", q, err)
			}
		}
	})
	for _, q := range ddl {
		if _, err := tg.DB.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return tb
}

func TestHostileInput(t *testing.T) {
	// Built once: 10 MB is expensive to make per case.
	tenMB := strings.Repeat("x", 10<<20)
	var nilCtx context.Context // a nil interface, as a caller's bug passes it

	gotLock := func(k dblock.Lock, err error) error {
		if k != nil {
			_ = k.Release(context.Background())
			return fmt.Errorf("got a lock (and err %v)", err)
		}
		return err
	}
	// Cases that only need a name: the call is a TryAcquire or an Acquire.
	try := func(name func(e *hostileEnv) string, opts ...dblock.Option) func(e *hostileEnv) func(context.Context) error {
		return func(e *hostileEnv) func(context.Context) error {
			n := name(e)
			return func(ctx context.Context) error { return gotLock(e.l.TryAcquire(ctx, n, opts...)) }
		}
	}
	acquire := func(name func(e *hostileEnv) string, opts ...dblock.Option) func(e *hostileEnv) func(context.Context) error {
		return func(e *hostileEnv) func(context.Context) error {
			n := name(e)
			return func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a bound against hangs
				defer cancel()
				return gotLock(e.l.Acquire(ctx, n, opts...))
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
			k := e.hold(e.n("held"))
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
	withLocker := func(mk func(e *hostileEnv) *forupdate.Locker, call func(l *forupdate.Locker, name string, ctx context.Context) error) func(e *hostileEnv) func(context.Context) error {
		return func(e *hostileEnv) func(context.Context) error {
			l := mk(e)
			name := e.n("x")
			return func(ctx context.Context) error { return call(l, name, ctx) }
		}
	}
	tryOn := func(l *forupdate.Locker, name string, ctx context.Context) error {
		return gotLock(l.TryAcquire(ctx, name))
	}
	acquireOn := func(l *forupdate.Locker, name string, ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a bound against hangs
		defer cancel()
		return gotLock(l.Acquire(ctx, name))
	}
	// newWith calls forupdate.New with opts (after the case's table); if
	// it wrongly succeeds, the Locker must still refuse to lock.
	newWith := func(db func(e *hostileEnv) *sql.DB, opts ...forupdate.Option) func(e *hostileEnv) func(context.Context) error {
		return func(e *hostileEnv) func(context.Context) error {
			pool := db(e)
			name := e.n("x")
			return func(ctx context.Context) error {
				l, err := forupdate.New(pool, append([]forupdate.Option{forupdate.WithTable(e.tables.locks)}, opts...)...)
				if err != nil {
					if l != nil {
						return fmt.Errorf("New returned a Locker with its error %v", err)
					}
					return err
				}
				return tryOn(l, name, ctx)
			}
		}
	}
	sharedDB := func(e *hostileEnv) *sql.DB { return e.db }
	otherDialect := func(e *hostileEnv) forupdate.Option {
		if e.tg.Dialect == dblock.Postgres {
			return forupdate.WithDialect(dblock.MySQL)
		}
		return forupdate.WithDialect(dblock.Postgres)
	}
	// serverTimeout reads, in the lock's transaction, the timeout after
	// which the server ends a silent holder's session.
	serverTimeout := func(e *hostileEnv, k dblock.Lock) (int64, error) {
		q := `SELECT setting::bigint FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'`
		if e.tg.Dialect == dblock.MySQL {
			q = `SELECT @@SESSION.wait_timeout`
		}
		var v int64
		err := k.(*forupdate.Lock).Tx().QueryRowContext(e.t.Context(), q).Scan(&v)
		return v, err
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
		{name: "name not UTF-8, Acquire", want: []error{dblock.ErrInvalidName}, arrange: acquire(named("\xff\xfe"))},
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
			name := e.n("'; DROP TABLE dblock_forupdate; --")
			quoted := e.n(`"; DELETE FROM dblock_forupdate WHERE '1'='1`)
			e.mayWrite(name, quoted)
			// The snapshot after the call reads the table: it is still there.
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
				return try(global(name))(e)
			}},

		// Acquisition options.
		{name: "TTL 0", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), dblock.TTL(0))},
		{name: "TTL negative", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), dblock.TTL(-time.Second))},
		{name: "TTL most negative", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), dblock.TTL(math.MinInt64))},
		{name: "TTL below MinTTL", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), dblock.TTL(dblock.MinTTL-1))},
		{name: "TTL below MinTTL, Acquire", want: []error{dblock.ErrInvalidOption}, arrange: acquire(named("x"), dblock.TTL(time.Millisecond))},
		{name: "MinHold negative", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), dblock.MinHold(-time.Nanosecond))},
		{name: "MinHold positive: the lock ends with its transaction", want: []error{dblock.ErrInvalidOption},
			arrange: try(named("x"), dblock.MinHold(time.Second))},
		{name: "MinHold positive, Acquire", want: []error{dblock.ErrInvalidOption}, arrange: acquire(named("x"), dblock.MinHold(time.Nanosecond))},
		{name: "Fair: the database orders the waiters", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), dblock.Fair())},
		{name: "Fair, Acquire", want: []error{dblock.ErrInvalidOption}, arrange: acquire(named("x"), dblock.Fair())},
		{name: "Fair on a held lock, Acquire", want: []error{dblock.ErrInvalidOption},
			arrange: onHeld(stillHeld, func(e *hostileEnv, k dblock.Lock, ctx context.Context) error {
				return acquire(global(k.Name()), dblock.Fair())(e)(ctx)
			})},
		{name: "note too long", want: []error{dblock.ErrInvalidOption},
			arrange: try(named("x"), dblock.Note(strings.Repeat("n", dblock.MaxNoteLength+1)))},
		{name: "note not UTF-8", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), dblock.Note("bad\xffnote"))},
		{name: "note with NUL", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), dblock.Note("nul\x00note"))},
		{name: "nil option", want: []error{dblock.ErrInvalidOption}, arrange: try(named("x"), nil)},
		{name: "nil option among good ones, Acquire", want: []error{dblock.ErrInvalidOption},
			arrange: acquire(named("x"), dblock.TTL(time.Second), nil, dblock.Note("n"))},
		{name: "bad option with a bad name reports the name", want: []error{dblock.ErrInvalidName},
			arrange: try(global(""), dblock.TTL(-1))},
		{name: "a note is accepted and ignored", arrange: func(e *hostileEnv) func(context.Context) error {
			name := e.n("x")
			e.mayWrite(name)
			return func(ctx context.Context) error {
				k, err := e.l.TryAcquire(ctx, name, dblock.Note("'; DROP TABLE x; --"))
				if err != nil {
					return err
				}
				return k.Release(ctx)
			}
		}},
		{name: "longest TTL is accepted and gives the longest server timeout", arrange: func(e *hostileEnv) func(context.Context) error {
			name := e.n("x")
			e.mayWrite(name)
			return func(ctx context.Context) error {
				k, err := e.l.TryAcquire(ctx, name, dblock.TTL(math.MaxInt64))
				if err != nil {
					return err
				}
				got, err := serverTimeout(e, k)
				// The largest each server takes: PostgreSQL's is an int of
				// milliseconds, MySQL's wait_timeout a year of seconds.
				want := int64(math.MaxInt32)
				if e.tg.Dialect == dblock.MySQL {
					want = 31536000
				}
				if err == nil && got != want {
					err = fmt.Errorf("with TTL(math.MaxInt64) the server ends a silent holder's session after %d, want %d", got, want)
				}
				return errors.Join(err, k.Release(ctx))
			}
		}},
		{name: "TTL of a fraction of a second rounds the server timeout up", arrange: func(e *hostileEnv) func(context.Context) error {
			name := e.n("x")
			e.mayWrite(name)
			return func(ctx context.Context) error {
				k, err := e.l.TryAcquire(ctx, name, dblock.TTL(1500*time.Millisecond))
				if err != nil {
					return err
				}
				got, err := serverTimeout(e, k)
				want := int64(1500)
				if e.tg.Dialect == dblock.MySQL {
					want = 2
				}
				if err == nil && got != want {
					err = fmt.Errorf("with TTL(1.5s) the server ends a silent holder's session after %d, want %d", got, want)
				}
				return errors.Join(err, k.Release(ctx))
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
			arrange: onHeld(stillHeld, func(e *hostileEnv, k dblock.Lock, ctx context.Context) error {
				return try(global(k.Name()))(e)(ctx)
			})},
		{name: "another owner's held lock, on another Locker", want: []error{dblock.ErrNotAcquired},
			arrange: onHeld(stillHeld, func(e *hostileEnv, k dblock.Lock, ctx context.Context) error {
				return tryOn(e.locker(e.db), k.Name(), ctx)
			})},

		// Contexts.
		{name: "nil context, TryAcquire", want: []error{dblock.ErrInvalidOption}, arrange: withCtx(func(context.Context) context.Context { return nilCtx }, try(named("x")))},
		{name: "nil context, Acquire", want: []error{dblock.ErrInvalidOption},
			arrange: func(e *hostileEnv) func(context.Context) error {
				name := e.n("x")
				return func(context.Context) error { return gotLock(e.l.Acquire(nilCtx, name)) }
			}},
		{name: "nil context, Release", want: []error{dblock.ErrInvalidOption},
			arrange: onHeld(stillHeld, func(_ *hostileEnv, k dblock.Lock, _ context.Context) error { return k.Release(nilCtx) })},
		{name: "nil context, Rollback", want: []error{dblock.ErrInvalidOption},
			arrange: onHeld(stillHeld, func(_ *hostileEnv, k dblock.Lock, _ context.Context) error {
				return k.(*forupdate.Lock).Rollback(nilCtx)
			})},
		{name: "nil context, Refresh", want: []error{dblock.ErrInvalidOption},
			arrange: onHeld(stillHeld, func(_ *hostileEnv, k dblock.Lock, _ context.Context) error { return k.Refresh(nilCtx) })},
		{name: "canceled context, TryAcquire", want: []error{dblock.ErrNotAcquired, context.Canceled}, arrange: withCtx(canceled, try(named("x")))},
		{name: "canceled context, Acquire", want: []error{dblock.ErrNotAcquired, context.Canceled}, arrange: withCtx(canceled, acquire(named("x")))},
		{name: "canceled context on a held lock, Acquire", want: []error{dblock.ErrNotAcquired, context.Canceled},
			arrange: onHeld(stillHeld, func(e *hostileEnv, k dblock.Lock, ctx context.Context) error {
				return acquire(global(k.Name()))(e)(canceled(ctx))
			})},
		{name: "deadline passed, TryAcquire", want: []error{dblock.ErrNotAcquired, context.DeadlineExceeded},
			arrange: withCtx(pastDeadline, try(named("x")))},
		{name: "deadline passed, Acquire", want: []error{dblock.ErrNotAcquired, context.DeadlineExceeded},
			arrange: withCtx(pastDeadline, acquire(named("x")))},
		{name: "deadline passes while waiting: no token drawn, nothing left", want: []error{dblock.ErrNotAcquired, context.DeadlineExceeded},
			arrange: onHeld(stillHeld, func(e *hostileEnv, k dblock.Lock, ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
				return gotLock(e.l.Acquire(ctx, k.Name()))
			})},

		// Database handles and Locker options.
		{name: "New(nil)", want: []error{dblock.ErrInvalidDB}, arrange: newWith(func(*hostileEnv) *sql.DB { return nil })},
		{name: "New(nil) with a dialect", want: []error{dblock.ErrInvalidDB},
			arrange: newWith(func(*hostileEnv) *sql.DB { return nil }, forupdate.WithDialect(dblock.Postgres))},
		{name: "New with a nil Option", want: []error{dblock.ErrInvalidOption}, arrange: newWith(sharedDB, nil)},
		{name: "New with dialect oracle", want: []error{dblock.ErrUnknownDialect}, arrange: newWith(sharedDB, forupdate.WithDialect("oracle"))},
		{name: "New with an empty dialect on an unknown driver", want: []error{dblock.ErrUnknownDialect},
			arrange: newWith(func(e *hostileEnv) *sql.DB {
				db := sql.OpenDB(hostileConnector{})
				e.t.Cleanup(func() { _ = db.Close() })
				return db
			})},
		{name: "New with the other dialect", want: []error{dblock.ErrUnknownDialect},
			arrange: func(e *hostileEnv) func(context.Context) error { return newWith(sharedDB, otherDialect(e))(e) }},
		{name: "New with a nil logger", want: []error{dblock.ErrInvalidOption}, arrange: newWith(sharedDB, forupdate.WithLogger(nil))},
		{name: "New with a zero connection timeout", want: []error{dblock.ErrInvalidOption}, arrange: newWith(sharedDB, forupdate.WithConnTimeout(0))},
		{name: "New with a negative connection timeout", want: []error{dblock.ErrInvalidOption},
			arrange: newWith(sharedDB, forupdate.WithConnTimeout(math.MinInt64))},
		{name: "table with a quote", want: []error{dblock.ErrInvalidOption},
			arrange: newWith(sharedDB, forupdate.WithTable(`locks"; DROP TABLE dblock_forupdate; --`))},
		{name: "table with a backtick", want: []error{dblock.ErrInvalidOption},
			arrange: newWith(sharedDB, forupdate.WithTable("locks`; DROP TABLE dblock_forupdate; --"))},
		{name: "schema-qualified table", want: []error{dblock.ErrInvalidOption}, arrange: newWith(sharedDB, forupdate.WithTable("public.dblock_forupdate"))},
		{name: "empty table", want: []error{dblock.ErrInvalidOption}, arrange: newWith(sharedDB, forupdate.WithTable(""))},
		{name: "table starting with a digit", want: []error{dblock.ErrInvalidOption}, arrange: newWith(sharedDB, forupdate.WithTable("1locks"))},
		{name: "table not ASCII", want: []error{dblock.ErrInvalidOption}, arrange: newWith(sharedDB, forupdate.WithTable("lócks"))},
		{name: "table of 57 bytes", want: []error{dblock.ErrInvalidOption}, arrange: newWith(sharedDB, forupdate.WithTable(strings.Repeat("t", 57)))},
		{name: "table of 10 MB", want: []error{dblock.ErrInvalidOption}, arrange: newWith(sharedDB, forupdate.WithTable(tenMB))},
		{name: "table of 56 bytes is a name, missing here", want: []error{dblock.ErrSchemaMissing}, msg: "migrations.Up",
			arrange: newWith(sharedDB, forupdate.WithTable(strings.Repeat("t", 56)))},
		{name: "closed *sql.DB, TryAcquire", want: []error{dblock.ErrInvalidDB},
			arrange: withLocker(func(e *hostileEnv) *forupdate.Locker { return e.locker(e.closedDB()) }, tryOn)},
		{name: "closed *sql.DB, Acquire", want: []error{dblock.ErrInvalidDB},
			arrange: withLocker(func(e *hostileEnv) *forupdate.Locker { return e.locker(e.closedDB()) }, acquireOn)},

		// Missing tables.
		{name: "missing table, TryAcquire", want: []error{dblock.ErrSchemaMissing}, msg: "migrations.Up",
			arrange: withLocker(func(e *hostileEnv) *forupdate.Locker {
				return e.locker(e.db, forupdate.WithTable("fu_hostile_no_such_table"))
			}, tryOn)},
		{name: "missing table, Acquire", want: []error{dblock.ErrSchemaMissing}, msg: "migrations.Up",
			arrange: withLocker(func(e *hostileEnv) *forupdate.Locker {
				return e.locker(e.db, forupdate.WithTable("fu_hostile_no_such_table"))
			}, acquireOn)},
		{name: "missing token counter, Acquire", want: []error{dblock.ErrSchemaMissing}, msg: "migrations.Up",
			arrange: withLocker(func(e *hostileEnv) *forupdate.Locker {
				return e.locker(e.db, forupdate.WithTable(createHostileTables(e.t, e.tg, true).locks))
			}, acquireOn)},

		// Lock handles.
		{name: "double Release", want: []error{dblock.ErrNotHeld},
			arrange: onHeld(released, func(_ *hostileEnv, k dblock.Lock, ctx context.Context) error { return k.Release(ctx) })},
		{name: "Rollback after Release", want: []error{dblock.ErrNotHeld},
			arrange: onHeld(released, func(_ *hostileEnv, k dblock.Lock, ctx context.Context) error {
				return k.(*forupdate.Lock).Rollback(ctx)
			})},
		{name: "Refresh after Release", want: []error{dblock.ErrNotHeld},
			arrange: onHeld(released, func(_ *hostileEnv, k dblock.Lock, ctx context.Context) error { return k.Refresh(ctx) })},
		{name: "double Release of one reentrant hold keeps the other", want: []error{dblock.ErrNotHeld},
			arrange: func(e *hostileEnv) func(context.Context) error {
				name := e.n("held")
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
	}

	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			tables := createHostileTables(t, tg, false)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("PANIC outside the call: %v\n%s", r, debug.Stack())
						}
					}()
					e := &hostileEnv{t: t, tg: tg, tables: tables, prefix: testdb.Name(t) + "/"}
					e.db = e.pool()
					e.l = e.locker(e.db)
					call := c.arrange(e)
					before, inUse := e.snapshot(), e.db.Stats().InUse
					panicked, err := callNoPanic(t, t.Context(), call)
					e.wedged = panicked
					after := e.snapshot()
					e.compare(before, after)
					if panicked {
						return
					}
					// A refused call keeps no connection: it would be lost
					// to the pool for good.
					if n := e.db.Stats().InUse; n != inUse {
						t.Errorf("%d connections of the pool in use after the call, %d before", n, inUse)
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

// TestMissingTableAndClosedDB: on a pool of one connection, a refused
// acquisition gives the connection back, usable.
func TestMissingTableAndClosedDB(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := singleConnDB(t, tg)
			l := newLocker(t, db, forupdate.WithTable("forupdate_no_such_table"))
			for _, try := range []bool{false, true} {
				var err error
				if try {
					_, err = l.TryAcquire(ctx, testdb.Name(t))
				} else {
					_, err = l.Acquire(ctx, testdb.Name(t))
				}
				if !errors.Is(err, dblock.ErrSchemaMissing) {
					t.Fatalf("missing table (try %v): %v, want ErrSchemaMissing", try, err)
				}
			}
			// The connection went back to the pool (of one): it is usable.
			if err := db.PingContext(ctx); err != nil {
				t.Fatal(err)
			}

			closed := testdb.Open(t, tg, tg.DSN)
			lc := newLocker(t, closed)
			_ = closed.Close()
			if _, err := lc.Acquire(ctx, testdb.Name(t)); !errors.Is(err, dblock.ErrInvalidDB) {
				t.Fatalf("closed *sql.DB: %v, want ErrInvalidDB", err)
			}
		})
	}
}
