// Package hostile is the hostile-input harness that rowlock's and
// forupdate's tests share: every bad input gets a typed error, changes
// nothing in the package's tables, keeps no pooled connection, echoes a
// bounded message, and panics nowhere; inputs that only look hostile work.
//
// Tests alone import it. A package supplies its environment as a Backend:
// how to make its Locker, which table holds its names, how to snapshot
// what a call could change. It supplies its constructor as a Kit.
// ContractCases are the cases every dblock.Locker must pass. A package
// appends its own cases, written with the same builders, before calling
// Run.
package hostile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// MaxMessage bounds what an error may echo of its input: a 10 MB name
// must not come back as a 10 MB error message.
const MaxMessage = 1024

// Arrange prepares what a case's input needs (locks held, pools closed)
// and returns the call to make; Run snapshots the tables around that call.
type Arrange func(e *Env) func(ctx context.Context) error

// Case is one hostile or mistaken input.
type Case struct {
	Name string
	// Want lists sentinels the error must wrap (errors.Is); empty means
	// the call must succeed (inputs that look hostile but are legal).
	Want []error
	// Msg, when set, must appear in the error text.
	Msg     string
	Arrange Arrange
}

// Backend is one package's environment on one target.
type Backend interface {
	// LockTable is the table with one row per lock name, in its column
	// "name", that the Lockers of this backend write.
	LockTable() string
	// Locker returns a Locker of the package on db, set up like the one
	// under test (same tables); it must not outlive the test.
	Locker(e *Env, db *sql.DB) dblock.Locker
	// Snapshot reads everything of the package's tables that the case's
	// call could change.
	Snapshot(e *Env) Snapshot
}

// Settler is a Backend whose Lockers keep a pooled connection of their
// own past a call, by design (rowlock's PostgreSQL listener, until it has
// been idle a while): Run lets Settle give it back before it counts the
// connections still in use.
type Settler interface {
	Settle(e *Env)
}

// Quiescer is a Backend whose Lockers finish work in the background after
// a call returns: forupdate restores MySQL sessions after Release, before
// their connections go back to the pool. Run lets Quiesce wait for that
// work before each count of the connections in use, the one after Arrange
// included. The Locker stays usable.
type Quiescer interface {
	Quiesce(e *Env)
}

// Env is what one case runs against.
type Env struct {
	T      *testing.T
	Target testdb.Target
	// DB and L are the case's own pool and Locker: a call that panics
	// inside database/sql can leave a pool's mutex locked for good, and
	// must not take the other cases down with it.
	DB     *sql.DB
	L      dblock.Locker
	Prefix string // every name the case makes starts with it

	backend Backend
	// wedged is set when the call panicked: clean-ups that would use the
	// case's pool are skipped (they could block forever).
	wedged bool
	// watched are names outside the prefix whose rows must not change
	// (the empty name, for one), for backends that snapshot by name.
	watched []string
	// writes are the names the call may write (a legal name acquired);
	// when there are any, the call may move counters too.
	writes []string
	// then runs after the snapshots were compared: checks that need to
	// change rows (the handle still works after a refused call).
	then []func()
}

// N returns a name of this case: the prefix plus suffix.
func (e *Env) N(suffix string) string { return e.Prefix + suffix }

// Watch adds names whose rows must not change to the snapshot.
func (e *Env) Watch(names ...string) { e.watched = append(e.watched, names...) }

// Watched returns the names given to Watch.
func (e *Env) Watched() []string { return e.watched }

// MayWrite allows the call to write the rows of names.
func (e *Env) MayWrite(names ...string) { e.writes = append(e.writes, names...) }

// AndThen runs fn after the snapshots were compared, if the case passed.
func (e *Env) AndThen(fn func()) { e.then = append(e.then, fn) }

// Wedged reports whether the call panicked: a clean-up must then leave
// the case's pool alone.
func (e *Env) Wedged() bool { return e.wedged }

// LockTable is the backend's table of lock names.
func (e *Env) LockTable() string { return e.backend.LockTable() }

// Locker returns another Locker of the package on db.
func (e *Env) Locker(db *sql.DB) dblock.Locker {
	e.T.Helper()
	return e.backend.Locker(e, db)
}

// Hold takes name for a fresh owner and releases it when the test ends.
func (e *Env) Hold(name string, opts ...dblock.Option) dblock.Lock {
	e.T.Helper()
	k, err := e.L.TryAcquire(e.T.Context(), name, opts...)
	if err != nil {
		e.T.Fatalf("arrange: TryAcquire(%q): %v", name, err)
	}
	e.T.Cleanup(func() {
		if !e.wedged {
			_ = k.Release(context.Background())
		}
	})
	return k
}

// pool opens a pool on the target's database for this case.
func (e *Env) pool() *sql.DB {
	e.T.Helper()
	db, err := sql.Open(e.Target.DriverName, e.Target.DSN)
	if err != nil {
		e.T.Fatalf("arrange: open: %v", err)
	}
	db.SetMaxOpenConns(4)
	e.T.Cleanup(func() {
		if !e.wedged {
			_ = db.Close()
		}
	})
	return db
}

// ClosedDB returns a pool on the target's database that is already closed.
func (e *Env) ClosedDB() *sql.DB {
	db := testdb.Open(e.T, e.Target, e.Target.DSN)
	_ = db.Close()
	return db
}

// storedName reads back the name of name's row byte for byte, and fails
// unless there is exactly one row and it matches.
func (e *Env) storedName(ctx context.Context, name string) error {
	q := `SELECT name FROM ` + e.LockTable() + ` WHERE name = $1`
	var arg any = name
	if e.Target.Dialect == dblock.MySQL {
		// The name columns are VARBINARY: compare bytes.
		q, arg = strings.ReplaceAll(q, "$1", "?"), []byte(name)
	}
	rows, err := e.Target.DB.QueryContext(ctx, q, arg)
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

// AcquireDistinct takes each of names (which must not block on the lock
// the case holds), checks its row carries exactly that name, and releases
// it.
func (e *Env) AcquireDistinct(ctx context.Context, names ...string) error {
	for _, name := range names {
		k, err := e.L.TryAcquire(ctx, name)
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

// Run runs every case on every target, each as a subtest named after it
// under the target's name. setup prepares a target once (tables of its
// own, say) and returns the backend its cases run on.
func Run(t *testing.T, targets []testdb.Target, setup func(t *testing.T, tg testdb.Target) Backend, cases []Case) {
	t.Helper()
	// t.Run would tell twins apart by a suffix: one would silently stand
	// for a case the other package defines differently.
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.Name] {
			t.Fatalf("two cases named %q", c.Name)
		}
		seen[c.Name] = true
	}
	for _, tg := range targets {
		t.Run(tg.Name, func(t *testing.T) {
			backend := setup(t, tg)
			for _, c := range cases {
				t.Run(c.Name, func(t *testing.T) { runCase(t, tg, backend, c) })
			}
		})
	}
}

// runCase injects one case's error and checks every outcome of it. Its
// complexity (over 15) is one branch per outcome checked.
func runCase(t *testing.T, tg testdb.Target, backend Backend, c Case) {
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("PANIC outside the call: %v\n%s", r, debug.Stack())
		}
	}()
	e := &Env{T: t, Target: tg, Prefix: testdb.Name(t) + "/", backend: backend}
	e.DB = e.pool()
	e.L = backend.Locker(e, e.DB)
	call := c.Arrange(e)
	quiesce := func() {
		if q, ok := backend.(Quiescer); ok {
			q.Quiesce(e)
		}
	}
	quiesce()
	before, inUse := backend.Snapshot(e), e.DB.Stats().InUse
	panicked, err := CallNoPanic(t, t.Context(), call)
	e.wedged = panicked
	after := backend.Snapshot(e)
	for _, d := range before.Diff(after, e.writes) {
		t.Error(d)
	}
	if panicked {
		return
	}
	// A refused call keeps no connection: it would be lost to the pool
	// for good.
	quiesce()
	if s, ok := backend.(Settler); ok {
		s.Settle(e)
	}
	if n := e.DB.Stats().InUse; n != inUse {
		t.Errorf("%d connections of the pool in use after the call, %d before", n, inUse)
	}
	if len(c.Want) == 0 && err != nil {
		t.Errorf("error %v, want success", err)
	}
	for _, w := range c.Want {
		if !errors.Is(err, w) {
			t.Errorf("error %v, want one wrapping %v", err, w)
		}
	}
	if err != nil && len(err.Error()) > MaxMessage {
		t.Errorf("error message of %d bytes: %.200q...", len(err.Error()), err.Error())
	}
	if c.Msg != "" && (err == nil || !strings.Contains(err.Error(), c.Msg)) {
		t.Errorf("error %v does not say %q", err, c.Msg)
	}
	if !t.Failed() {
		for _, fn := range e.then {
			fn()
		}
	}
}

// CallNoPanic runs call and turns a panic into a test failure, so one
// panicking case neither kills the test binary nor hides the others.
func CallNoPanic(t testing.TB, ctx context.Context, call func(context.Context) error) (panicked bool, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("PANIC: %v\n%s", r, debug.Stack())
			panicked, err = true, nil
		}
	}()
	return false, call(ctx)
}

// Keys returns the keys of all maps, sorted, each once.
func Keys[V any](maps ...map[string]V) []string {
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
