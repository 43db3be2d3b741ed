package torture_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

func TestMain(m *testing.M) {
	if testdb.IsChild() {
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
		goleak.IgnoreAnyFunction("github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1"),
	)
}

const (
	workers       = 4
	perWorker     = 3
	tortureTTL    = time.Second
	tortureLength = 12 * time.Second
)

// kinds of lock under torture, by name prefix: rowlock unfair and fair,
// and forupdate.
var kinds = []string{"unfair", "fair", "forupdate"}

// TestTortureWorker is a worker process: its goroutines acquire the names in
// SQLLOCK_TORTURE_NAMES until SQLLOCK_TORTURE_UNTIL (Unix ms), writing each
// hold to its ledger. In a normal run it returns at once.
func TestTortureWorker(t *testing.T) {
	if !testdb.IsChild() || os.Getenv("SQLLOCK_TORTURE_DSN") == "" {
		return
	}
	dialect, _ := dblock.ParseDialect(os.Getenv("SQLLOCK_TORTURE_DIALECT"))
	driver := map[dblock.Dialect]string{dblock.Postgres: "pgx", dblock.MySQL: "mysql"}[dialect]
	lockDB, err := sql.Open(driver, os.Getenv("SQLLOCK_TORTURE_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	clockDB, err := sql.Open(driver, os.Getenv("SQLLOCK_TORTURE_CLOCK_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	led, err := openLedger(os.Getenv("SQLLOCK_TORTURE_LEDGER"))
	if err != nil {
		t.Fatal(err)
	}
	until, _ := strconv.ParseInt(os.Getenv("SQLLOCK_TORTURE_UNTIL"), 10, 64)
	deadline := time.UnixMilli(until)
	names := strings.Split(os.Getenv("SQLLOCK_TORTURE_NAMES"), ",")
	rl, err := rowlock.New(lockDB, rowlock.WithWaiterTTL(tortureTTL), rowlock.WithPollInterval(5*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	fl, err := forupdate.New(lockDB)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("worker up")
	var holds atomic.Int64
	var wg sync.WaitGroup
	for range perWorker {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				name := names[rand.IntN(len(names))]
				var l dblock.Locker = rl
				if strings.HasPrefix(name, "forupdate/") {
					l = fl
				}
				if hold(l, clockDB, dialect, led, name) {
					holds.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("worker done %d\n", holds.Load())
}

// hold takes name once, records the hold and releases it; it reports
// whether a hold was recorded.
//
// A rowlock holder believes in its lock while Lock.Err is nil: the lease
// outlives that belief by design. A forupdate lock lives exactly as long as
// its transaction, which the server may end at any moment (a cut
// connection), so its holder reads the clock inside that transaction: a read
// that succeeds proves the row was still locked at that time.
func hold(l dblock.Locker, clockDB *sql.DB, d dblock.Dialect, led *ledger, name string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*tortureTTL)
	defer cancel()
	opts := []dblock.Option{dblock.TTL(tortureTTL)}
	if strings.HasPrefix(name, "fair/") {
		opts = append(opts, dblock.Fair())
	}
	lock, err := l.Acquire(ctx, name, opts...)
	if err != nil {
		return false
	}
	defer lock.Release(context.Background())
	var clock querier = clockDB
	if fu, ok := lock.(*forupdate.Lock); ok {
		clock = fu.Tx()
	}
	start, err := dbNow(clock, d)
	if err != nil || lock.Err() != nil {
		return false
	}
	time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
	end, err := dbNow(clock, d)
	if err != nil || lock.Err() != nil {
		// Still believed at start only.
		end = start
	}
	return led.add(entry{Name: name, Token: lock.Token(), Start: start, End: end, Pid: os.Getpid()}) == nil
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

// worker is a running worker process.
type worker struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
}

// startWorker runs a worker; skew offsets its monotonic clock by an hour
// through a Linux time namespace (Go's timers and leases run on it).
func startWorker(t *testing.T, env []string, skew bool) *worker {
	t.Helper()
	args := []string{os.Args[0], "-test.run=^TestTortureWorker$", "-test.count=1", "-test.v"}
	if skew {
		args = append([]string{"unshare", "--time", "--monotonic", "3600", "--boottime", "3600"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(append(os.Environ(), "SQLLOCK_TEST_CHILD=1"), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker (skew %v): %v", skew, err)
	}
	w := &worker{cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		_ = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(w.kill)
	return w
}

func (w *worker) kill() {
	_ = w.cmd.Process.Kill()
	<-w.done
}

// restartServer restarts a database server and waits until it answers.
func restartServer(t *testing.T, tg testdb.Target) {
	t.Helper()
	cmd := map[dblock.Dialect]string{
		dblock.Postgres: `pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n1)" main restart`,
		dblock.MySQL: `mysqladmin -h127.0.0.1 -uroot shutdown && ` +
			`for i in $(seq 100); do pgrep -x mariadbd >/dev/null || break; sleep 0.1; done; ` +
			`start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`,
	}[tg.Dialect]
	if v := os.Getenv("SQLLOCK_TORTURE_RESTART_" + strings.ToUpper(tg.Name)); v != "" {
		cmd = v
	}
	if out, err := exec.Command("bash", "-c", cmd).CombinedOutput(); err != nil {
		t.Fatalf("restart %s: %v\n%s", tg.Name, err, out)
	}
	for range 600 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := tg.DB.PingContext(ctx)
		cancel()
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not come back within a minute of its restart", tg.Name)
}

func TestTorture(t *testing.T) {
	if testing.Short() {
		t.Skip("torture suite: not under -short")
	}
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			var names []string
			for _, k := range kinds {
				for i := range 2 {
					names = append(names, fmt.Sprintf("%s/%s/%d", k, testdb.Name(t), i))
				}
			}
			proxy := testdb.NewProxy(t, tg.HostPort())
			dir := t.TempDir()
			until := time.Now().Add(tortureLength)
			n := 0
			env := func() []string {
				n++
				return []string{
					"SQLLOCK_TORTURE_DIALECT=" + tg.Name,
					"SQLLOCK_TORTURE_DSN=" + tg.DSNVia(proxy.Addr()),
					"SQLLOCK_TORTURE_CLOCK_DSN=" + tg.DSN,
					"SQLLOCK_TORTURE_LEDGER=" + filepath.Join(dir, fmt.Sprintf("worker-%d.jsonl", n)),
					"SQLLOCK_TORTURE_NAMES=" + strings.Join(names, ","),
					"SQLLOCK_TORTURE_UNTIL=" + strconv.FormatInt(until.UnixMilli(), 10),
				}
			}
			live := make([]*worker, workers)
			for i := range live {
				// One worker runs an hour ahead on its monotonic clock.
				live[i] = startWorker(t, env(), i == 0)
			}
			var kills, cuts, restarts int
			restarted := false
			for time.Now().Before(until.Add(-2 * time.Second)) {
				time.Sleep(time.Duration(500+rand.IntN(700)) * time.Millisecond)
				switch {
				case !restarted && time.Until(until) < tortureLength/2:
					restartServer(t, tg)
					restarted = true
					restarts++
				case rand.IntN(2) == 0:
					i := 1 + rand.IntN(workers-1)
					live[i].kill()
					live[i] = startWorker(t, env(), false)
					kills++
				default:
					proxy.Cut()
					time.Sleep(time.Duration(200+rand.IntN(600)) * time.Millisecond)
					proxy.Restore()
					cuts++
				}
			}
			for _, w := range live {
				select {
				case <-w.done:
				case <-time.After(tortureLength + 30*time.Second):
					t.Fatal("a worker did not finish")
				}
			}
			entries, err := readLedgers(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range check(entries) {
				t.Error(err)
			}
			perName := map[string]int{}
			for _, e := range entries {
				perName[e.Name]++
			}
			for _, name := range names {
				if perName[name] == 0 {
					t.Errorf("%s was never held: the torture exercised nothing", name)
				}
			}
			// Every lock can be had again once the dust settles.
			rl, err := rowlock.New(tg.DB)
			if err != nil {
				t.Fatal(err)
			}
			defer rl.Close()
			fl, err := forupdate.New(tg.DB)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range names {
				var l dblock.Locker = rl
				if strings.HasPrefix(name, "forupdate/") {
					l = fl
				}
				ctx, cancel := context.WithTimeout(t.Context(), 30*tortureTTL)
				k, err := l.Acquire(ctx, name)
				cancel()
				if err != nil {
					t.Errorf("%s not acquirable after the torture: %v", name, err)
					continue
				}
				_ = k.Release(t.Context())
			}
			summary := fmt.Sprintf("torture %s: %d holds checked over %d names by %d workers (one an hour ahead); survived %d SIGKILLs, %d connection cuts, %d server restarts",
				tg.Name, len(entries), len(names), n, kills, cuts, restarts)
			t.Log(summary)
			fmt.Println(summary)
		})
	}
}
