package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

// TestCLI builds the binary once and runs it against both databases, each
// on a schema of its own (migrate down must not drop the tables other
// packages' tests use).
func TestCLI(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "sqllock")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, shared := range testdb.Targets(t) {
		t.Run(shared.Name, func(t *testing.T) {
			t.Parallel()
			tg, dsn := isolated(t, shared)
			cli := &sqllockCLI{t: t, bin: bin, dsn: dsn}
			ctx := t.Context()

			t.Run("migrate", func(t *testing.T) {
				cli.t = t
				cli.expect(exitError, "", "run 'sqllock migrate up' first", "status")
				cli.expect(exitOK, "0\n", "the schema is behind", "migrate", "version")
				// --dsn instead of SQLLOCK_DSN.
				out := cli.expect(exitOK, "", "", "--dsn", dsn, "migrate", "up")
				if !strings.Contains(out, fmt.Sprintf("schema at version %d", migrations.Latest)) {
					t.Errorf("migrate up printed %q", out)
				}
				cli.expect(exitOK, fmt.Sprintf("%d\n", migrations.Latest), "", "migrate", "version")
				cli.expect(exitOK, "", "", "migrate", "up")
				cli.expect(exitUsage, "", "pass --yes", "migrate", "down")
				cli.expect(exitOK, "lock tables dropped\n", "", "migrate", "down", "--yes")
				cli.expect(exitOK, "0\n", "", "migrate", "version")
				cli.expect(exitOK, "", "", "migrate", "up")
			})
			locker, err := rowlock.New(tg.DB)
			if err != nil {
				t.Fatal(err)
			}
			defer locker.Close()

			t.Run("run passes the exit code through", func(t *testing.T) {
				cli.t = t
				name := testdb.Name(t)
				cli.expect(0, "", "", "run", "--name", name, "--", "true")
				cli.expect(1, "", "", "run", "--name", name, "--", "false")
				cli.expect(3, "", "", "run", "--name", name, "--", "sh", "-c", "exit 3")
				// Without "--" too.
				cli.expect(4, "", "", "run", "--name", name, "sh", "-c", "exit 4")
				cli.expect(exitNotFound, "", "command not found", "run", "--name", name, "--", "no-such-command-sqllock")
				out := cli.expect(0, "", "", "run", "--name", name, "--", "sh", "-c", `echo "$SQLLOCK_NAME $SQLLOCK_TOKEN"`)
				got := strings.Fields(out)
				if len(got) != 2 || got[0] != name {
					t.Fatalf("command saw %q, want the lock name and token", out)
				}
				if token, err := strconv.ParseInt(got[1], 10, 64); err != nil || token < 1 {
					t.Errorf("SQLLOCK_TOKEN = %q", got[1])
				}
				// Every run released the lock.
				k, err := locker.TryAcquire(ctx, name)
				if err != nil {
					t.Fatalf("lock not released after run: %v", err)
				}
				_ = k.Release(ctx)
			})

			t.Run("held elsewhere", func(t *testing.T) {
				cli.t = t
				name := testdb.Name(t)
				held, err := locker.TryAcquire(ctx, name, dblock.Note("held by the test"))
				if err != nil {
					t.Fatal(err)
				}
				cli.expect(exitTempFail, "", "sqllock: lock "+name+" is held by another process", "run", "--name", name, "--", "true")
				start := time.Now()
				cli.expect(exitTempFail, "", "waited 300ms", "run", "--name", name, "--wait", "300ms", "--", "true")
				if d := time.Since(start); d < 300*time.Millisecond {
					t.Errorf("--wait 300ms gave up after %v", d)
				}

				// status shows the held lock, and a waiter (of another
				// lock: a live waiter keeps non-fair acquirers out).
				insertWaiter(t, tg, name+"/queued")
				table := cli.expect(0, "", "", "status")
				if !strings.Contains(table, name) || !strings.Contains(table, "held by the test") || !strings.Contains(table, "WAITING FOR") {
					t.Errorf("status does not show the lock and its waiter:\n%s", table)
				}
				var rep statusReport
				if err := json.Unmarshal([]byte(cli.expect(0, "", "", "status", "--json")), &rep); err != nil {
					t.Fatal(err)
				}
				owner := held.(*rowlock.Lock).Owner()
				found := false
				for _, l := range rep.Locks {
					if l.Name == name {
						found = true
						if l.Token != held.Token() || l.OwnerID != owner.ID || l.OwnerHost != owner.Host || l.HoldCount != 1 ||
							l.Note != "held by the test" || l.HeldForMS < 0 || l.ExpiresInMS <= 0 || l.ExpiresInMS > 30000 {
							t.Errorf("status --json shows %+v; held with token %d by %+v", l, held.Token(), owner)
						}
					}
				}
				if !found || len(rep.Waiters) != 1 || rep.Waiters[0].Name != name+"/queued" {
					t.Errorf("status --json = %+v, want lock %q and its waiter", rep, name)
				}

				// Released while a run waits: the run gets it.
				go func() {
					time.Sleep(300 * time.Millisecond)
					_ = held.Release(context.Background())
				}()
				cli.expect(0, "", "", "run", "--name", name, "--wait", "10s", "--", "true")
			})

			t.Run("lock lost", func(t *testing.T) {
				cli.t = t
				name := testdb.Name(t)
				p := cli.start("run", "--name", name, "--ttl", "600ms", "--", "sh", "-c", trapScript(42))
				p.waitLine("started")
				// Another process takes the lock over (as after a lapse).
				exec1(t, tg, `UPDATE dblock_locks SET owner_id = 'thief', token = token + 1 WHERE name = ?`, name)
				if code := p.wait(10 * time.Second); code != 42 {
					t.Errorf("exit %d, want the command's 42 after its SIGTERM\nstderr: %s", code, p.stderr.String())
				}
				if !strings.Contains(p.stderr.String(), "lock "+name+" lost") {
					t.Errorf("stderr does not say the lock was lost:\n%s", p.stderr.String())
				}
			})

			t.Run("signals are passed on", func(t *testing.T) {
				cli.t = t
				name := testdb.Name(t)
				p := cli.start("run", "--name", name, "--", "sh", "-c", trapScript(43))
				p.waitLine("started")
				if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				if code := p.wait(10 * time.Second); code != 43 {
					t.Errorf("exit %d, want the command's 43 after the SIGTERM sqllock got\nstderr: %s", code, p.stderr.String())
				}
				k, err := locker.TryAcquire(ctx, name)
				if err != nil {
					t.Fatalf("lock not released after the command ended: %v", err)
				}
				_ = k.Release(ctx)
			})

			t.Run("reap", func(t *testing.T) {
				cli.t = t
				name := testdb.Name(t)
				insertLapsed(t, tg, name)
				out := cli.expect(0, "", "", "reap")
				// The rows of the runs above lapsed seconds ago: within the
				// default grace.
				if out != "deleted 1 lock rows and 1 dead waiters\n" {
					t.Errorf("reap printed %q", out)
				}
				var n int
				query := `SELECT count(*) FROM dblock_locks WHERE name = ?`
				if tg.Dialect == dblock.Postgres {
					query = strings.Replace(query, "?", "$1", 1)
				}
				if err := tg.DB.QueryRowContext(ctx, query, name).Scan(&n); err != nil || n != 0 {
					t.Errorf("lapsed row left (%d, %v)", n, err)
				}
				out = cli.expect(0, "", "", "reap", "--grace", "0")
				if !strings.HasPrefix(out, "deleted ") || strings.HasPrefix(out, "deleted 0 ") {
					t.Errorf("reap --grace 0 printed %q, want the released rows deleted", out)
				}
			})
		})
	}
}

// trapScript is a shell command that prints "started" and runs until
// SIGTERM, then exits with code.
func trapScript(code int) string {
	return fmt.Sprintf(`trap "exit %d" TERM; echo started; while :; do sleep 0.05; done`, code)
}

type sqllockCLI struct {
	t   *testing.T
	bin string
	dsn string
}

func (c *sqllockCLI) command(args ...string) *exec.Cmd {
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(os.Environ(), "SQLLOCK_DSN="+c.dsn)
	return cmd
}

// expect runs sqllock with args and checks its exit code, that its stdout
// contains stdout and its stderr contains stderr. It returns stdout.
func (c *sqllockCLI) expect(code int, stdout, stderr string, args ...string) string {
	c.t.Helper()
	cmd := c.command(args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	got := 0
	if exitErr, ok := errors.AsType[*exec.ExitError](err); ok {
		got = exitErr.ExitCode()
	} else if err != nil {
		c.t.Fatalf("sqllock %s: %v", strings.Join(args, " "), err)
	}
	if got != code || !strings.Contains(out.String(), stdout) || !strings.Contains(errOut.String(), stderr) {
		c.t.Errorf("sqllock %s: exit %d, want %d\nstdout: %s\nstderr: %s\nwant stdout containing %q and stderr containing %q",
			strings.Join(args, " "), got, code, out.String(), errOut.String(), stdout, stderr)
	}
	if strings.Contains(errOut.String(), "goroutine ") {
		c.t.Errorf("stack trace on stderr:\n%s", errOut.String())
	}
	return out.String()
}

type process struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string
	stderr *bytes.Buffer
}

// start starts sqllock in the background; the test kills it if it is still
// running at the end.
func (c *sqllockCLI) start(args ...string) *process {
	c.t.Helper()
	cmd := c.command(args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	p := &process{t: c.t, cmd: cmd, lines: make(chan string, 16), stderr: &bytes.Buffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = cmd.Process.Kill() })
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	return p
}

func (p *process) waitLine(want string) {
	p.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("output ended before %q; stderr: %s", want, p.stderr.String())
			}
			if line == want {
				return
			}
		case <-timeout:
			p.t.Fatalf("no %q within 10s; stderr: %s", want, p.stderr.String())
		}
	}
}

// wait returns the exit code, failing the test if the process runs longer.
func (p *process) wait(within time.Duration) int {
	p.t.Helper()
	done := make(chan error, 1)
	go func() {
		for range p.lines {
			// Drain stdout: Wait returns once it is read to the end.
		}
		done <- p.cmd.Wait()
	}()
	select {
	case <-done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		p.t.Fatalf("still running after %v; stderr: %s", within, p.stderr.String())
		return -1
	}
}

// isolated returns tg with a pool on a schema (PostgreSQL) or database
// (MySQL) of its own, not migrated, and the sqllock URL for it.
func isolated(t *testing.T, tg testdb.Target) (testdb.Target, string) {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "sqllock_cli_" + hex.EncodeToString(b[:])
	create, drop := `CREATE SCHEMA `+name, `DROP SCHEMA IF EXISTS `+name+` CASCADE`
	if tg.Dialect == dblock.MySQL {
		create, drop = `CREATE DATABASE `+name, `DROP DATABASE IF EXISTS `+name
	}
	shared := tg.DB
	if _, err := shared.ExecContext(t.Context(), create); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := shared.ExecContext(context.Background(), drop); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	var cliURL string
	if tg.Dialect == dblock.MySQL {
		cfg, err := mysql.ParseDSN(tg.DSN)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DBName = name
		tg.DSN = cfg.FormatDSN()
		u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + name}
		if cfg.Passwd != "" {
			u.User = url.UserPassword(cfg.User, cfg.Passwd)
		} else {
			u.User = url.User(cfg.User)
		}
		cliURL = u.String()
	} else {
		u, err := url.Parse(tg.DSN)
		if err != nil || !strings.HasPrefix(u.Scheme, "postgres") {
			t.Fatalf("the CLI tests need a postgres:// URL in SQLLOCK_POSTGRES_DSN, got %q", tg.DSN)
		}
		q := u.Query()
		q.Set("search_path", name)
		u.RawQuery = q.Encode()
		tg.DSN = u.String()
		cliURL = tg.DSN
	}
	tg.DB = testdb.Open(t, tg, tg.DSN)
	return tg, cliURL
}

func exec1(t *testing.T, tg testdb.Target, query string, args ...any) {
	t.Helper()
	if tg.Dialect == dblock.Postgres {
		for i := 1; strings.Contains(query, "?"); i++ {
			query = strings.Replace(query, "?", "$"+strconv.Itoa(i), 1)
		}
	}
	if _, err := tg.DB.ExecContext(t.Context(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func insertWaiter(t *testing.T, tg testdb.Target, name string) {
	now := "clock_timestamp()"
	if tg.Dialect == dblock.MySQL {
		now = "UTC_TIMESTAMP(6)"
	}
	exec1(t, tg, `INSERT INTO dblock_waiters (name, owner_host, owner_id, created_at, expires_at)
VALUES (?, 'cli-test', 'waiter', `+now+`, `+now+` + INTERVAL '1' HOUR)`, name)
}

// insertLapsed inserts a lock row and a waiter that lapsed two hours ago.
func insertLapsed(t *testing.T, tg testdb.Target, name string) {
	now := "clock_timestamp()"
	if tg.Dialect == dblock.MySQL {
		now = "UTC_TIMESTAMP(6)"
	}
	exec1(t, tg, `INSERT INTO dblock_locks
    (name, stripe, token, owner_host, owner_id, hold_count, note, acquired_at, min_hold_until, expires_at)
VALUES (?, 1, 1, 'cli-test', 'crashed', 1, '', `+now+` - INTERVAL '3' HOUR, `+now+` - INTERVAL '3' HOUR, `+now+` - INTERVAL '2' HOUR)`, name)
	exec1(t, tg, `INSERT INTO dblock_waiters (name, owner_host, owner_id, created_at, expires_at)
VALUES (?, 'cli-test', 'dead', `+now+` - INTERVAL '3' HOUR, `+now+` - INTERVAL '2' HOUR)`, name)
}
