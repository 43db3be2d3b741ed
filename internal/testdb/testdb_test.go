package testdb_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

func TestMain(m *testing.M) {
	// The Proxy promises to stop every goroutine it starts; so does Child.
	testdb.Main(m)
}

func TestTargets(t *testing.T) {
	targets := testdb.Targets(t)
	var want []string
	for _, name := range []string{"postgres", "mysql"} {
		if !testdb.LeftOut(t, name) {
			want = append(want, name)
		}
	}
	if !slices.Equal(names(targets), want) {
		t.Fatalf("Targets = %v, want %v", names(targets), want)
	}
	wantDialect := map[string]dblock.Dialect{"postgres": dblock.Postgres, "mysql": dblock.MySQL}
	wantDriver := map[string]string{"postgres": "pgx", "mysql": "mysql"}
	for _, tg := range targets {
		t.Run(tg.Name, func(t *testing.T) {
			if tg.Dialect != wantDialect[tg.Name] || tg.DriverName != wantDriver[tg.Name] {
				t.Errorf("Dialect, DriverName = %q, %q", tg.Dialect, tg.DriverName)
			}
			var one int
			if err := tg.DB.QueryRowContext(t.Context(), `SELECT 1`).Scan(&one); err != nil || one != 1 {
				t.Fatalf("SELECT 1 = %d, %v", one, err)
			}
			// Migrated: the lock table is there.
			var n int
			if err := tg.DB.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM dblock_locks`).Scan(&n); err != nil {
				t.Fatalf("dblock_locks not migrated: %v", err)
			}
			// Pointing a DSN at the address it already has changes nothing,
			// so DSNVia keeps user, database and parameters.
			if got := tg.DSNVia(tg.HostPort()); got != tg.DSN {
				t.Errorf("DSNVia(HostPort()) = %q, want %q", got, tg.DSN)
			}
			if got := tg.DSNVia("127.0.0.1:1"); !strings.Contains(got, "127.0.0.1:1") || got == tg.DSN {
				t.Errorf("DSNVia(127.0.0.1:1) = %q", got)
			}
		})
	}
	// Targets is cheap after the first call and hands out the same pools.
	again := testdb.Targets(t)
	for i := range targets {
		if again[i].DB != targets[i].DB {
			t.Errorf("second Targets call opened a new %s pool", targets[i].Name)
		}
	}
}

func TestDefaultDSNs(t *testing.T) {
	if testdb.DefaultMySQLDSN != "root@tcp(127.0.0.1:3306)/test" {
		// The library must work without parseTime, multiStatements & co.
		t.Errorf("DefaultMySQLDSN = %q carries parameters", testdb.DefaultMySQLDSN)
	}
	for _, tg := range testdb.Targets(t) {
		want := map[string]string{"postgres": "127.0.0.1:5432", "mysql": "127.0.0.1:3306"}[tg.Name]
		if tg.DSN == map[string]string{"postgres": testdb.DefaultPostgresDSN, "mysql": testdb.DefaultMySQLDSN}[tg.Name] &&
			tg.HostPort() != want {
			t.Errorf("%s: HostPort() = %q, want %q", tg.Name, tg.HostPort(), want)
		}
	}
}

func TestProxy(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			proxy := testdb.NewProxy(t, tg.HostPort())
			db := testdb.Open(t, tg, tg.DSNVia(proxy.Addr()))

			// A pinned connection, so the query after Cut must use the very
			// connection that was live when it was cut.
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatalf("connect through proxy: %v", err)
			}
			defer conn.Close()
			if err := ping(ctx, conn); err != nil {
				t.Fatalf("query through proxy: %v", err)
			}
			// A session lock held through the proxy shows that Cut also
			// ends the server's side: the server frees it.
			key := testdb.Name(t)
			key = key[strings.LastIndex(key, "-")+1:] // MySQL lock names: 64 bytes at most
			if err := sessionLock(ctx, tg, conn, key); err != nil {
				t.Fatalf("session lock through proxy: %v", err)
			}
			if free, err := sessionLockFree(ctx, tg, key); err != nil || free {
				t.Fatalf("session lock free = %v, %v before Cut", free, err)
			}

			proxy.Cut()
			if err := ping(ctx, conn); err == nil {
				t.Fatal("query on a cut connection succeeded")
			}
			// New connections are refused while cut.
			fresh := testdb.Open(t, tg, tg.DSNVia(proxy.Addr()))
			shortCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := fresh.PingContext(shortCtx); err == nil {
				t.Fatal("new connection through a cut proxy succeeded")
			}
			waitFor(t, 20*time.Second, "server to free the cut session's lock", func() bool {
				free, err := sessionLockFree(ctx, tg, key)
				return err == nil && free
			})

			proxy.Restore()
			again := testdb.Open(t, tg, tg.DSNVia(proxy.Addr()))
			if err := again.PingContext(ctx); err != nil {
				t.Fatalf("fresh pool after Restore: %v", err)
			}
			var one int
			if err := again.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
				t.Fatalf("query after Restore: %v", err)
			}
		})
	}
}

// TestProxyManyConnections forwards many concurrent connections, as the
// many-goroutine lock tests will, and cuts them all at once.
func TestProxyManyConnections(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			proxy := testdb.NewProxy(t, tg.HostPort())
			db := testdb.Open(t, tg, tg.DSNVia(proxy.Addr()))
			const n = 20
			conns := make([]*sql.Conn, n)
			for i := range conns {
				c, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				conns[i] = c
			}
			errs := make(chan error, n)
			for _, c := range conns {
				go func() { errs <- ping(ctx, c) }()
			}
			for range n {
				if err := <-errs; err != nil {
					t.Fatalf("concurrent query through proxy: %v", err)
				}
			}
			proxy.Cut()
			for i, c := range conns {
				if err := ping(ctx, c); err == nil {
					t.Fatalf("connection %d survived Cut", i)
				}
			}
		})
	}
}

// TestProxyCleanupStopsGoroutines leaves a client connected when its test
// ends: the proxy's cleanup must still close it and stop its goroutines.
func TestProxyCleanupStopsGoroutines(t *testing.T) {
	// A target that greets, so the test knows the forwarding is up.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serverDone := make(chan struct{})
	go func() {
		defer close(serverDone)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write([]byte("hello\n"))
		_, _ = io.Copy(io.Discard, c) // until the proxy closes its side
	}()

	before := goleak.IgnoreCurrent()
	var client net.Conn
	t.Run("leaves a client connected", func(t *testing.T) {
		proxy := testdb.NewProxy(t, ln.Addr().String())
		client, err = net.Dial("tcp", proxy.Addr())
		if err != nil {
			t.Fatal(err)
		}
		greeting, err := bufio.NewReader(client).ReadString('\n')
		if err != nil || greeting != "hello\n" {
			t.Fatalf("through proxy: %q, %v", greeting, err)
		}
	})
	defer client.Close()
	select {
	case <-serverDone: // the proxy closed its connection to the target
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy's cleanup left its connection to the target open")
	}
	goleak.VerifyNone(t, before)
	// The client's side was closed too.
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := client.Read(make([]byte, 1)); err == nil {
		t.Fatalf("client still connected after the proxy's cleanup (read %d bytes)", n)
	}
}

// TestOpenWaitsForCanceledQuery: a query whose context ends mid-flight
// makes pgx return at once and close the connection in a goroutine of its
// own (pgconn's asyncClose), which database/sql's Close does not wait for.
// Once the test that opened a pool with Open has ended, nothing of that
// connection may be left running, or the leak check of a binary whose last
// tests cancel a query (a Leader stopped while it campaigns) fails on a
// slow machine. The statement traps the cancel and keeps its backend busy
// for two seconds, so that the goroutine outlives the cleanup by more than
// the leak check's retries: deterministic, where load made the flake.
func TestOpenWaitsForCanceledQuery(t *testing.T) {
	tg := testdb.Targets(t)[0]
	before := goleak.IgnoreCurrent()
	t.Run("cancel mid-query", func(t *testing.T) {
		db := testdb.Open(t, tg, tg.DSN)
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err := db.ExecContext(ctx, `DO $$ BEGIN PERFORM pg_sleep(60);
			EXCEPTION WHEN query_canceled THEN PERFORM pg_sleep(2); END $$`)
		if err == nil || ctx.Err() == nil {
			t.Fatalf("query = %v, want it cut short by its context", err)
		}
	})
	goleak.VerifyNone(t, before)
}

// TestChildHelper is the body of TestChild's child process; in a normal run
// it returns at once (a skip would be counted).
func TestChildHelper(t *testing.T) {
	if !testdb.IsChild() {
		return
	}
	// Enough noise to overflow any small buffer between the child and
	// WaitLine: the line that matters comes last.
	for i := range 5000 {
		fmt.Printf("noise %d\n", i)
	}
	fmt.Printf("ready %s\n", os.Getenv("SQLLOCK_TESTDB_GREETING"))
	// Sleep rather than block on a channel: the runtime would call a
	// goroutine-free wait a deadlock. Kill ends it long before.
	time.Sleep(time.Hour)
}

func TestChild(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	child := testdb.Child(t, "TestChildHelper", "SQLLOCK_TESTDB_GREETING=hello")
	line, err := child.WaitLine(ctx, "ready ")
	if err != nil {
		t.Fatal(err)
	}
	if line != "ready hello" {
		t.Fatalf("WaitLine = %q, want %q (env not passed?)", line, "ready hello")
	}
	child.Kill()
	if st := child.Cmd.ProcessState; st == nil || st.Success() || !strings.Contains(st.String(), "killed") {
		t.Fatalf("after Kill, process state = %v, want killed", st)
	}
	// Nothing more will come from a dead child: WaitLine says so at once.
	if _, err := child.WaitLine(ctx, "ready "); err == nil || ctx.Err() != nil {
		t.Fatalf("WaitLine after Kill = %v, want an error saying the child exited", err)
	}
	child.Kill() // twice is harmless
}

func TestChildWaitLineHonoursContext(t *testing.T) {
	child := testdb.Child(t, "TestChildHelper")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := child.WaitLine(ctx, "never printed"); err == nil || ctx.Err() == nil {
		t.Fatalf("WaitLine = %v, want the context's error", err)
	}
}

func TestName(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		n := testdb.Name(t)
		if seen[n] {
			t.Fatalf("Name repeated %q", n)
		}
		seen[n] = true
		if !strings.HasPrefix(n, "TestName-") {
			t.Fatalf("Name = %q, want it to start with the test name", n)
		}
	}
	t.Run(strings.Repeat("very long subtest name with spaces/and/slashes ", 10), func(t *testing.T) {
		n := testdb.Name(t)
		if len(n) > 200 {
			t.Fatalf("len(Name) = %d > 200: %q", len(n), n)
		}
		if strings.ContainsAny(n, " /") {
			t.Fatalf("Name %q keeps unsafe characters", n)
		}
	})
}

func names(ts []testdb.Target) []string {
	var out []string
	for _, tg := range ts {
		out = append(out, tg.Name)
	}
	return out
}

func ping(ctx context.Context, c *sql.Conn) error {
	var one int
	return c.QueryRowContext(ctx, `SELECT 1`).Scan(&one)
}

// sessionLock takes a lock that lives as long as conn's server session.
func sessionLock(ctx context.Context, tg testdb.Target, conn *sql.Conn, key string) error {
	var got int
	var err error
	if tg.Dialect == dblock.Postgres {
		_, err = conn.ExecContext(ctx, `SELECT pg_advisory_lock(hashtext($1))`, key)
		got = 1
	} else {
		err = conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, 5)`, key).Scan(&got)
	}
	if err == nil && got != 1 {
		err = fmt.Errorf("lock %q not granted", key)
	}
	return err
}

// sessionLockFree asks the server, from another session, whether key is
// free.
func sessionLockFree(ctx context.Context, tg testdb.Target, key string) (bool, error) {
	if tg.Dialect == dblock.MySQL {
		var n int
		err := tg.DB.QueryRowContext(ctx, `SELECT IS_FREE_LOCK(?)`, key).Scan(&n)
		return n == 1, err
	}
	// PostgreSQL has no "is free": try it, and give it back on the same
	// session.
	conn, err := tg.DB.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	var got bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock(hashtext($1))`, key).Scan(&got); err != nil || !got {
		return false, err
	}
	_, err = conn.ExecContext(ctx, `SELECT pg_advisory_unlock(hashtext($1))`, key)
	return true, err
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
