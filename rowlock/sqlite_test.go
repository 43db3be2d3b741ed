package rowlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

// The many-process contention test: sqliteProcs processes of
// sqliteGoroutines goroutines each take one name sqliteRounds times.
const (
	sqliteProcs      = 6
	sqliteGoroutines = 4
	sqliteRounds     = 15
)

// TestSQLiteManyProcesses: processes sharing one SQLite file exclude each
// other, hand out growing tokens, and never see an error: SQLite's single
// writer makes every other writer wait (busy_timeout), never fail with
// SQLITE_BUSY. Each holder appends "enter" and "leave" lines to a ledger
// file shared by all (O_APPEND writes of one line are atomic); the parent
// then checks that entries and leaves alternate with growing tokens.
func TestSQLiteManyProcesses(t *testing.T) {
	if testdb.LeftOut(t, testdb.SQLiteName) {
		return
	}
	tg := testdb.SQLite(t)
	name := testdb.Name(t)
	ledger := filepath.Join(t.TempDir(), "ledger")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // a bound against hangs only
	defer cancel()
	children := make([]*testdb.ChildProcess, sqliteProcs)
	for i := range children {
		children[i] = testdb.Child(t, "TestChildSQLiteContender",
			append(tg.ChildEnv(), "SQLLOCK_CHILD_LOCK="+name, "SQLLOCK_CHILD_LEDGER="+ledger)...)
	}
	for i, c := range children {
		if _, err := c.WaitLine(ctx, "contender done"); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
	}
	holds := checkSQLiteLedger(t, ledger)
	if want := sqliteProcs * sqliteGoroutines * sqliteRounds; holds != want {
		t.Fatalf("ledger records %d holds, want %d", holds, want)
	}
}

// checkSQLiteLedger reads the ledger file and returns the number of holds
// it records, failing the test when two overlap or a token does not grow.
func checkSQLiteLedger(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var holder string
	var last int64
	holds := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 3 && fields[0] == "enter":
			token, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil {
				t.Fatalf("ledger line %q: %v", sc.Text(), err)
			}
			if holder != "" {
				t.Fatalf("%s entered with token %d while %s holds with token %d: two holders", fields[1], token, holder, last)
			}
			if token <= last {
				t.Fatalf("%s entered with token %d after token %d: tokens must grow", fields[1], token, last)
			}
			holder, last = fields[1], token
			holds++
		case len(fields) == 2 && fields[0] == "leave":
			if fields[1] != holder {
				t.Fatalf("%s left while the holder is %q", fields[1], holder)
			}
			holder = ""
		default:
			t.Fatalf("ledger line %q", sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return holds
}

// TestChildSQLiteContender is the body of TestSQLiteManyProcesses's
// children; in a normal run it returns at once. Any error fails it, and
// the parent with it.
func TestChildSQLiteContender(t *testing.T) {
	if !testdb.IsChild() {
		return
	}
	tg := testdb.SQLite(t)
	name := os.Getenv("SQLLOCK_CHILD_LOCK")
	ledger, err := os.OpenFile(os.Getenv("SQLLOCK_CHILD_LEDGER"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	l := newLocker(t, tg.DB)
	var wg sync.WaitGroup
	for g := range sqliteGoroutines {
		who := fmt.Sprintf("%d/%d", os.Getpid(), g)
		wg.Go(func() {
			for range sqliteRounds {
				if err := holdAndLog(t.Context(), l, name, who, ledger); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if !t.Failed() {
		fmt.Println("contender done")
	}
}

// holdAndLog takes name, records the hold in the ledger, and releases it.
func holdAndLog(ctx context.Context, l *rowlock.Locker, name, who string, ledger *os.File) error {
	k, err := l.Acquire(ctx, name)
	if err != nil {
		return fmt.Errorf("%s: Acquire: %w", who, err)
	}
	if _, err := fmt.Fprintf(ledger, "enter %s %d\n", who, k.Token()); err != nil {
		return err
	}
	time.Sleep(time.Millisecond) // some work under the lock
	if _, err := fmt.Fprintf(ledger, "leave %s\n", who); err != nil {
		return err
	}
	if err := k.Release(ctx); err != nil {
		return fmt.Errorf("%s: Release: %w", who, err)
	}
	return nil
}

// TestSQLiteNeedsBusyTimeout: a pool whose DSN sets no busy timeout would
// make contending processes fail with SQLITE_BUSY, so migrations.Up and the
// Locker refuse it with dblock.ErrInvalidDB naming the parameter to add,
// and change nothing.
func TestSQLiteNeedsBusyTimeout(t *testing.T) {
	if testdb.LeftOut(t, testdb.SQLiteName) {
		return
	}
	tg := testdb.SQLite(t)
	bare := testdb.Open(t, tg, strings.Split(tg.DSN, "?")[0])
	if err := migrations.Up(t.Context(), bare); !errors.Is(err, dblock.ErrInvalidDB) || !strings.Contains(err.Error(), "busy_timeout(") {
		t.Fatalf("migrations.Up without busy_timeout: %v, want ErrInvalidDB naming busy_timeout", err)
	}
	l := newLocker(t, bare)
	name := testdb.Name(t)
	if _, err := l.TryAcquire(t.Context(), name); !errors.Is(err, dblock.ErrInvalidDB) || !strings.Contains(err.Error(), "busy_timeout(") {
		t.Fatalf("TryAcquire without busy_timeout: %v, want ErrInvalidDB naming busy_timeout", err)
	}
	if row := readRow(t, tg, name); row.exists {
		t.Fatalf("the refused TryAcquire wrote a row: %+v", row)
	}
}

// TestSQLiteRefusesKinds: the lock kinds built on row locks are refused on
// SQLite with an error wrapping errors.ErrUnsupported, taking nothing.
func TestSQLiteRefusesKinds(t *testing.T) {
	if testdb.LeftOut(t, testdb.SQLiteName) {
		return
	}
	tg := testdb.SQLite(t)
	l := newLocker(t, tg.DB)
	name := testdb.Name(t)
	sem, err := l.Semaphore(2)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"AcquireAll": func() error { _, err := l.TryAcquireAll(t.Context(), []string{name}); return err },
		"Semaphore":  func() error { _, err := sem.TryAcquire(t.Context(), name); return err },
		"Writers":    func() error { _, err := l.Writers().TryAcquire(t.Context(), name); return err },
		"Readers":    func() error { _, err := l.Readers().TryAcquire(t.Context(), name); return err },
	}
	for what, call := range calls {
		if err := call(); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s on SQLite: %v, want errors.ErrUnsupported", what, err)
		}
	}
	if row := readRow(t, tg, name); row.exists {
		t.Fatalf("a refused call wrote a row: %+v", row)
	}
}
