package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
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
				cli.expect(exitConfig, "", "run 'sqllock migrate up' first", "status")
				cli.expect(exitOK, "0\n", "the schema is behind", "migrate", "version")
				// --dsn instead of SQLLOCK_DSN.
				out := cli.expect(exitOK, "", "", "--dsn", dsn, "migrate", "up")
				if !strings.Contains(out, fmt.Sprintf("schema at version %d", migrations.Latest)) {
					t.Errorf("migrate up printed %q", out)
				}
				cli.expect(exitOK, fmt.Sprintf("%d\n", migrations.Latest), "", "migrate", "version")
				// version only reads: it answers on a read-only connection.
				roCLI := &sqllockCLI{t: t, bin: bin, dsn: readOnlyDSN(t, tg, dsn)}
				roCLI.expect(exitOK, fmt.Sprintf("%d\n", migrations.Latest), "", "migrate", "version")
				roCLI.expect(exitUnavailable, "", "read-only", "migrate", "up")
				cli.expect(exitOK, "", "", "migrate", "up")
				cli.expect(exitUsage, "", "pass --yes", "migrate", "down")
				cli.expect(exitOK, "lock tables dropped\n", "", "migrate", "down", "--yes")
				cli.expect(exitOK, "0\n", "", "migrate", "version")
				cli.expect(exitOK, "", "", "migrate", "up")

				// A version these migrations do not have (a development
				// build's from before the first release).
				setVersion := func(v int) {
					q := fmt.Sprintf("UPDATE %s SET version = %d", migrations.MigrationsTable, v)
					if _, err := tg.DB.ExecContext(ctx, q); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
				setVersion(8) // of the replaced history, not of these migrations
				for _, args := range [][]string{{"migrate", "up"}, {"migrate", "version"}} {
					cli.expect(exitConfig, "", "drop sqllock's tables and "+migrations.MigrationsTable, args...)
					if out, _ := cli.command(args...).CombinedOutput(); strings.Contains(string(out), "migrate up' first") {
						t.Errorf("sqllock %s at version 8 says to run migrate up first: %s", strings.Join(args, " "), out)
					}
				}
				setVersion(migrations.Latest)
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

			t.Run("semaphore", func(t *testing.T) {
				cli.t = t
				name := testdb.Name(t)
				sem, err := locker.Semaphore(2)
				if err != nil {
					t.Fatal(err)
				}
				held, err := sem.TryAcquire(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				// One permit of two is free: a run gets it, and sees its
				// token.
				out := cli.expect(0, "", "", "run", "--limit", "2", "--name", name, "--", "sh", "-c", `echo "$SQLLOCK_TOKEN"`)
				if token, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64); err != nil || token < 1 {
					t.Errorf("SQLLOCK_TOKEN = %q", out)
				}
				// With both taken, a run exits 75 in silence.
				other, err := sem.TryAcquire(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				if code, out, errOut := cli.run("run", "--limit", "2", "--name", name, "--", "true"); code != exitTempFail || out != "" || errOut != "" {
					t.Errorf("run --limit 2 with both permits held: exit %d, stdout %q, stderr %q; want 75 and nothing printed", code, out, errOut)
				}
				// Another limit while permits are held is a configuration
				// error, which says so.
				cli.expect(exitConfig, "", "limit", "run", "--limit", "3", "--name", name, "--", "true")
				cli.expect(exitUsage, "", "--limit must be", "run", "--limit", "-1", "--name", name, "--", "true")

				// status shows the permits held against the limit, and a
				// read/write lock's readers.
				rwName := testdb.Name(t)
				reader, err := locker.Readers().TryAcquire(ctx, rwName)
				if err != nil {
					t.Fatal(err)
				}
				table := cli.expect(0, "", "", "status")
				if !regexp.MustCompile(`(?m)^SEMAPHORE +PERMITS HELD\n(.*\n)*`+regexp.QuoteMeta(name)+` +2/2$`).MatchString(table) ||
					!regexp.MustCompile(`(?m)^READ/WRITE LOCK +READERS +WRITER\n(.*\n)*`+regexp.QuoteMeta(rwName)+` +1 +-$`).MatchString(table) {
					t.Errorf("status does not show 2/2 permits of %s and 1 reader of %s:\n%s", name, rwName, table)
				}
				var rep statusReport
				if err := json.Unmarshal([]byte(cli.expect(0, "", "", "status", "--json")), &rep); err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(rep.Semaphores, statusSemaphore{Name: name, Held: 2, Limit: 2}) ||
					!slices.Contains(rep.RWLocks, statusRWLock{Name: rwName, Readers: 1}) {
					t.Errorf("status --json shows semaphores %+v and read/write locks %+v; want %s 2 of 2 and %s 1 reader",
						rep.Semaphores, rep.RWLocks, name, rwName)
				}
				_ = reader.Release(ctx)
				_ = held.Release(ctx)
				_ = other.Release(ctx)
				testSemaphoreSlots(t, cli, testdb.Name(t))
			})

			t.Run("the Go driver's DSN", func(t *testing.T) {
				// tg.DSN is what a Go program gives sql.Open: on MySQL
				// go-sql-driver's user@tcp(host:port)/dbname, not a URL.
				goCLI := &sqllockCLI{t: t, bin: bin, dsn: tg.DSN}
				goCLI.expect(exitOK, fmt.Sprintf("%d\n", migrations.Latest), "", "migrate", "version")
				goCLI.expect(exitOK, "ran\n", "", "run", "--name", testdb.Name(t), "--", "echo", "ran")
			})

			t.Run("held elsewhere", func(t *testing.T) {
				cli.t = t
				name := testdb.Name(t)
				held, err := locker.TryAcquire(ctx, name, dblock.Note("held by the test"))
				if err != nil {
					t.Fatal(err)
				}
				owner := held.(*rowlock.Lock).Owner()
				// The message names the holder.
				cli.expect(exitTempFail, "", "sqllock: lock "+name+" is held by another process (by "+owner.Host+" for ", "run", "-v", "--name", name, "--", "true")
				start := time.Now()
				cli.expect(exitTempFail, "", "waited 300ms", "run", "--name", name, "--wait", "300ms", "-v", "--", "true")
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

			t.Run("lock lost stops the command's whole process group", func(t *testing.T) {
				cli.t = t
				name := testdb.Name(t)
				pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
				p := cli.start("run", "--name", name, "--ttl", "600ms", "--", "sh", "-c", grandchildScript, "sh", pidFile)
				p.waitLine("started")
				grandchild := runningPid(t, pidFile)
				exec1(t, tg, `UPDATE dblock_locks SET owner_id = 'thief', token = token + 1 WHERE name = ?`, name)
				// sh, waiting for its job, dies of the SIGTERM.
				if code := p.wait(60 * time.Second); code != 128+int(syscall.SIGTERM) {
					t.Errorf("exit %d, want %d (sh killed by SIGTERM)\nstderr: %s", code, 128+int(syscall.SIGTERM), p.stderr.String())
				}
				// sqllock returns only once the group is gone.
				if grandchild.alive() {
					t.Errorf("the command's background job (pid %d) still runs after the lock was lost and sqllock exited", grandchild.pid)
				}
			})

			t.Run("lock lost while the command's group is stopped", func(t *testing.T) {
				cli.t = t
				name := testdb.Name(t)
				pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
				p := cli.start("run", "--name", name, "--ttl", "600ms", "--kill-after", "0", "--", "sh", "-c", grandchildScript, "sh", pidFile)
				p.waitLine("started")
				grandchild := runningPid(t, pidFile)
				// As Ctrl-Z or a debugger would: a stopped process acts on
				// SIGTERM only once continued.
				pgid, err := strconv.Atoi(grandchild.field(t, 5))
				if err != nil {
					t.Fatal(err)
				}
				if err := syscall.Kill(-pgid, syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				waitUntil(t, "the command's group to stop", func() bool { return grandchild.field(t, 3) == "T" }, nil)
				exec1(t, tg, `UPDATE dblock_locks SET owner_id = 'thief', token = token + 1 WHERE name = ?`, name)
				if code := p.wait(60 * time.Second); code != 128+int(syscall.SIGTERM) {
					t.Errorf("exit %d, want %d (sh killed by SIGTERM)\nstderr: %s", code, 128+int(syscall.SIGTERM), p.stderr.String())
				}
				if grandchild.alive() {
					t.Errorf("the command's stopped background job (pid %d) still exists after the lock was lost", grandchild.pid)
				}
			})

			t.Run("lock lost: SIGKILL after --kill-after reaches the whole group", func(t *testing.T) {
				cli.t = t
				name := testdb.Name(t)
				pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
				// The shell and its job (which inherits the ignored
				// disposition) both ignore SIGTERM.
				p := cli.start("run", "--name", name, "--ttl", "600ms", "--kill-after", "1s", "--",
					"sh", "-c", `trap "" TERM; `+grandchildScript, "sh", pidFile)
				p.waitLine("started")
				grandchild := runningPid(t, pidFile)
				exec1(t, tg, `UPDATE dblock_locks SET owner_id = 'thief', token = token + 1 WHERE name = ?`, name)
				if code := p.wait(60 * time.Second); code != 128+int(syscall.SIGKILL) {
					t.Errorf("exit %d, want %d (sh killed by SIGKILL)\nstderr: %s", code, 128+int(syscall.SIGKILL), p.stderr.String())
				}
				if !strings.Contains(p.stderr.String(), "sending SIGKILL") {
					t.Errorf("stderr does not say SIGKILL was sent:\n%s", p.stderr.String())
				}
				if grandchild.alive() {
					t.Errorf("the command's background job (pid %d), which ignores SIGTERM, still runs after SIGKILL", grandchild.pid)
				}
			})

			t.Run("signals reach the whole group", func(t *testing.T) {
				cli.t = t
				name := testdb.Name(t)
				pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
				p := cli.start("run", "--name", name, "--", "sh", "-c", grandchildScript, "sh", pidFile)
				p.waitLine("started")
				grandchild := runningPid(t, pidFile)
				if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
				// A non-interactive sh runs background jobs with SIGINT
				// ignored (POSIX), so only sh stops; sqllock then ends the
				// job that outlives it before it releases the lock.
				if code := p.wait(60 * time.Second); code != 128+int(syscall.SIGINT) {
					t.Errorf("exit %d, want %d\nstderr: %s", code, 128+int(syscall.SIGINT), p.stderr.String())
				}
				if grandchild.alive() {
					t.Errorf("the command's background job (pid %d) still runs after sqllock exited", grandchild.pid)
				}
				k, err := locker.TryAcquire(ctx, name)
				if err != nil {
					t.Fatalf("lock not released after the command ended: %v", err)
				}
				_ = k.Release(ctx)
			})

			t.Run("killed: its command dies with it, before the next holder's runs", func(t *testing.T) {
				cli.t = t
				testKilledRun(t, cli, testdb.Name(t))
			})

			t.Run("processes left behind are stopped before the lock is released", func(t *testing.T) {
				cli.t = t
				name := testdb.Name(t)
				pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
				// sh exits 0 at once, leaving its job running.
				cli.expect(0, "", "left processes running", "run", "--name", name, "--", "sh", "-c", `sleep 1000 >/dev/null 2>&1 & echo $! > "$1"`, "sh", pidFile)
				b, err := os.ReadFile(pidFile)
				if err != nil {
					t.Fatal(err)
				}
				pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
				// The pid must be gone entirely, not merely not sleep yet.
				if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
					t.Errorf("the command's background job (pid %d) still exists after sqllock released the lock (kill 0: %v)", pid, err)
				}
			})

			t.Run("not executable", func(t *testing.T) {
				cli.t = t
				name := testdb.Name(t)
				script := filepath.Join(t.TempDir(), "job.sh")
				if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				cli.expect(exitNoExec, "", "cannot execute "+script, "run", "--name", name, "--", script)
				k, err := locker.TryAcquire(ctx, name)
				if err != nil {
					t.Fatalf("lock not released after the command could not start: %v", err)
				}
				_ = k.Release(ctx)
			})

			t.Run("signal while waiting for the lock", func(t *testing.T) {
				cli.t = t
				name := testdb.Name(t)
				// Held by a row written here, not by a Locker: a Locker's
				// renewals would block behind the row lock below and be
				// counted as sqllock waiting.
				insertHeld(t, tg, name)
				// Lock the lock's row too, so that sqllock's attempt blocks
				// in the database, where the test can see it waiting.
				tx, err := tg.DB.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback() }()
				blockers := blockedBehind(t, tg, tx, name)
				marker := filepath.Join(t.TempDir(), "ran")
				p := cli.start("run", "--name", name, "--wait", "10m", "--", "sh", "-c", `touch "$1"`, "sh", marker)
				waitUntil(t, "sqllock to wait for the lock in the database", func() bool { return blockers() > 0 }, p.stderr)
				if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				if code := p.wait(60 * time.Second); code != 128+int(syscall.SIGTERM) {
					t.Errorf("exit %d, want %d\nstderr: %s", code, 128+int(syscall.SIGTERM), p.stderr.String())
				}
				if want := "interrupted by terminated while waiting for lock " + name; !strings.Contains(p.stderr.String(), want) {
					t.Errorf("stderr %q does not contain %q", p.stderr.String(), want)
				}
				if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the command ran although sqllock never got the lock (%v)", err)
				}
				if err := tx.Rollback(); err != nil {
					t.Fatal(err)
				}
				// sqllock took nothing: the row is as the test wrote it.
				var owner string
				query := `SELECT owner_id FROM dblock_locks WHERE name = ?`
				if tg.Dialect == dblock.Postgres {
					query = strings.Replace(query, "?", "$1", 1)
				}
				if err := tg.DB.QueryRowContext(ctx, query, name).Scan(&owner); err != nil || owner != "held-by-test" {
					t.Errorf("the lock's owner after sqllock gave up: %q, %v", owner, err)
				}
			})

			t.Run("lock held elsewhere: quiet unless -v", func(t *testing.T) {
				cli.t = t
				testQuietSkip(t, cli, tg)
			})

			t.Run("database trouble", func(t *testing.T) {
				cli.t = t
				testDatabaseTrouble(t, cli, shared, dsn)
			})

			t.Run("version", func(t *testing.T) {
				cli.t = t
				testVersion(t, cli)
			})

			t.Run("reap", func(t *testing.T) {
				cli.t = t
				name := testdb.Name(t)
				insertLapsed(t, tg, name, 2*3600)
				// Lapsed a second ago by the database clock: within the
				// default grace (a minute), so reap must keep it.
				insertLapsed(t, tg, name+"/recent", 1)
				out := cli.expect(0, "", "", "reap")
				var locks, waiters, limits int
				if _, err := fmt.Sscanf(out, "deleted %d lock rows, %d dead waiters and %d semaphore limits\n", &locks, &waiters, &limits); err != nil || locks < 1 || waiters < 1 {
					t.Errorf("reap printed %q, want at least the lock row and waiter lapsed two hours ago deleted", out)
				}
				count := func(table, name string) int {
					var n int
					query := `SELECT count(*) FROM ` + table + ` WHERE name = ?`
					if tg.Dialect == dblock.Postgres {
						query = strings.Replace(query, "?", "$1", 1)
					}
					if err := tg.DB.QueryRowContext(ctx, query, name).Scan(&n); err != nil {
						t.Fatal(err)
					}
					return n
				}
				if n, m := count("dblock_locks", name), count("dblock_waiters", name); n != 0 || m != 0 {
					t.Errorf("lock rows and waiters lapsed two hours ago left: %d, %d", n, m)
				}
				if n, m := count("dblock_locks", name+"/recent"), count("dblock_waiters", name+"/recent"); n != 1 || m != 1 {
					t.Errorf("lock rows and waiters lapsed within the grace: %d, %d left, want 1, 1", n, m)
				}
				// A semaphore's permit, released: its slot row and its
				// limit go too, and reap counts the limit.
				semName := name + "/semaphore"
				sem, err := locker.Semaphore(2)
				if err != nil {
					t.Fatal(err)
				}
				p, err := sem.TryAcquire(ctx, semName)
				if err != nil {
					t.Fatal(err)
				}
				slot := semName + lockinput.KindSeparator + "s" + fmt.Sprint(p.(*rowlock.Permit).Slot())
				if n := count("dblock_locks", slot); n != 1 {
					t.Fatalf("%d rows %q: not the permit's slot row", n, slot)
				}
				_ = p.Release(ctx)
				out = cli.expect(0, "", "", "reap", "--grace", "0")
				if _, err := fmt.Sscanf(out, "deleted %d lock rows, %d dead waiters and %d semaphore limits\n", &locks, &waiters, &limits); err != nil || locks < 2 || limits < 1 {
					t.Errorf("reap --grace 0 printed %q, want the released rows (a permit's among them) and a semaphore limit deleted", out)
				}
				if n, m := count("dblock_locks", slot), count("dblock_semaphores", semName); n != 0 || m != 0 {
					t.Errorf("after reap --grace 0: %d slot rows and %d limits of a semaphore with no permit held left", n, m)
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

// grandchildScript starts a background job, writes its pid to the file
// named by $1, prints "started" and waits for the job.
// The job's output goes to /dev/null so that it does not keep sqllock's
// stdout pipe open, which would hold up the test rather than fail it.
const grandchildScript = `sleep 1000 >/dev/null 2>&1 & echo $! > "$1"; echo started; wait`

// proc is a process the test did not start and cannot wait for.
type proc struct{ pid int }

// alive reports whether pid is still a running "sleep" (not a zombie, not
// a new process that reused the pid).
func (p proc) alive() bool { return p.runs("sleep") }

// runs reports whether pid is still a running process named comm.
func (p proc) runs(comm string) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return false
	}
	// "pid (comm) state ...", where comm may contain spaces and ')'.
	open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if open < 0 || end < open || string(stat[open+1:end]) != comm {
		return false
	}
	fields := strings.Fields(string(stat[end+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// field returns field n (1-based, as in proc(5): 3 is the state, 5 the
// process group) of /proc/pid/stat, or "" once the process is gone.
func (p proc) field(t *testing.T, n int) string {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return ""
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < n-2 {
		t.Fatalf("/proc/%d/stat: %q", p.pid, stat)
	}
	return fields[n-3]
}

// runningPid reads the pid of the background job the command wrote and
// waits until that job runs sleep (sh writes $! before its child execs),
// so that a later "gone" cannot pass because it never ran. The test kills
// it at the end if sqllock did not.
func runningPid(t *testing.T, file string) proc {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q: %v", b, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	p := proc{pid}
	waitUntil(t, fmt.Sprintf("the background job (pid %d) to run sleep", pid), p.alive, nil)
	return p
}

// blockedBehind locks name's row in tx and returns a function that counts
// the other sessions stuck on it: on PostgreSQL those it blocks, on MySQL
// those running an UPDATE of dblock_locks in this test's database (only
// sqllock's acquire, which cannot finish while the row is locked).
func blockedBehind(t *testing.T, tg testdb.Target, tx *sql.Tx, name string) func() int {
	t.Helper()
	ctx := t.Context()
	lockRow, self := `SELECT token FROM dblock_locks WHERE name = ? FOR UPDATE`, `SELECT CONNECTION_ID()`
	// MariaDB does not always list an autocommit statement that waits for
	// a row lock in innodb_trx; the process list shows it running.
	waiting := `
SELECT count(*) FROM information_schema.processlist
WHERE db = DATABASE() AND id <> ? AND id <> CONNECTION_ID() AND info LIKE 'UPDATE dblock_locks%'`
	if tg.Dialect == dblock.Postgres {
		lockRow, self = `SELECT token FROM dblock_locks WHERE name = $1 FOR UPDATE`, `SELECT pg_backend_pid()`
		waiting = `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`
	}
	var token, session int64
	if err := tx.QueryRowContext(ctx, lockRow, name).Scan(&token); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRowContext(ctx, self).Scan(&session); err != nil {
		t.Fatal(err)
	}
	return func() int {
		var n int
		if err := tg.DB.QueryRowContext(ctx, waiting, session).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// waitUntil polls cond, failing the test if it is not true within a
// minute (a liveness bound, not a timing requirement).
func waitUntil(t *testing.T, what string, cond func() bool, stderr *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			if stderr != nil {
				t.Fatalf("gave up waiting for %s; sqllock's stderr: %s", what, stderr.String())
			}
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	got, out, errOut := c.run(args...)
	if got != code || !strings.Contains(out, stdout) || !strings.Contains(errOut, stderr) {
		c.t.Errorf("sqllock %s: exit %d, want %d\nstdout: %s\nstderr: %s\nwant stdout containing %q and stderr containing %q",
			strings.Join(args, " "), got, code, out, errOut, stdout, stderr)
	}
	return out
}

// run runs sqllock with args and returns its exit code and output.
func (c *sqllockCLI) run(args ...string) (code int, stdout, stderr string) {
	c.t.Helper()
	cmd := c.command(args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if exitErr, ok := errors.AsType[*exec.ExitError](err); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		c.t.Fatalf("sqllock %s: %v", strings.Join(args, " "), err)
	}
	if strings.Contains(errOut.String(), "goroutine ") {
		c.t.Errorf("stack trace on stderr:\n%s", errOut.String())
	}
	return code, out.String(), errOut.String()
}

type process struct {
	t      *testing.T
	cmd    *exec.Cmd
	lines  chan string
	stderr *syncBuffer
}

// syncBuffer is a bytes.Buffer that a failing test may read while the
// process still writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
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
	p := &process{t: c.t, cmd: cmd, lines: make(chan string, 16), stderr: &syncBuffer{}}
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
	own, name := testdb.Isolated(t, tg, "sqllock_cli", nil)
	if own.Dialect != dblock.MySQL {
		return own, own.DSN
	}
	cfg, err := mysql.ParseDSN(own.DSN)
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + name}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	} else {
		u.User = url.User(cfg.User)
	}
	return own, u.String()
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

// insertHeld inserts a lock row held for an hour by an owner that never
// renews it.
func insertHeld(t *testing.T, tg testdb.Target, name string) {
	now := "clock_timestamp()"
	if tg.Dialect == dblock.MySQL {
		now = "UTC_TIMESTAMP(6)"
	}
	exec1(t, tg, `INSERT INTO dblock_locks
    (name, stripe, token, owner_host, owner_id, hold_count, note, acquired_at, min_hold_until, expires_at)
VALUES (?, 1, 1, 'cli-test', 'held-by-test', 1, '', `+now+`, `+now+`, `+now+` + INTERVAL '1' HOUR)`, name)
}

// insertLapsed inserts a lock row and a waiter that lapsed secondsAgo
// seconds ago by the database clock.
func insertLapsed(t *testing.T, tg testdb.Target, name string, secondsAgo int) {
	lapsed := `clock_timestamp() - ? * INTERVAL '1' SECOND`
	if tg.Dialect == dblock.MySQL {
		lapsed = `UTC_TIMESTAMP(6) - INTERVAL ? SECOND`
	}
	exec1(t, tg, `INSERT INTO dblock_locks
    (name, stripe, token, owner_host, owner_id, hold_count, note, acquired_at, min_hold_until, expires_at)
VALUES (?, 1, 1, 'cli-test', 'crashed', 1, '', `+lapsed+`, `+lapsed+`, `+lapsed+`)`, name, secondsAgo+3600, secondsAgo+3600, secondsAgo)
	exec1(t, tg, `INSERT INTO dblock_waiters (name, owner_host, owner_id, created_at, expires_at)
VALUES (?, 'cli-test', 'dead', `+lapsed+`, `+lapsed+`)`, name, secondsAgo+3600, secondsAgo)
}
