package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// killedScript writes the shell's pid to $1, starts a background job whose
// pid goes to $2, prints "started" and writes a heartbeat to $3 until it is
// killed: a job that would go on writing without the lock.
const killedScript = `echo $$ > "$1"; sleep 1000 >/dev/null 2>&1 & echo $! > "$2"; echo started; ` +
	`while :; do date >> "$3"; sleep 0.05; done`

// testKilledRun SIGKILLs a run whose command runs a background job, and
// starts another run of the same lock that waits: by the time the second
// run's command starts, the first run's command and its job are gone.
func testKilledRun(t *testing.T, cli *sqllockCLI, name string) {
	dir := t.TempDir()
	shellPid, jobPid, heartbeat := filepath.Join(dir, "sh.pid"), filepath.Join(dir, "job.pid"), filepath.Join(dir, "heartbeat")
	first := cli.start("run", "--name", name, "--", "sh", "-c", killedScript, "sh", shellPid, jobPid, heartbeat)
	first.waitLine("started")
	job := runningPid(t, jobPid)
	b, err := os.ReadFile(shellPid)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	shell := proc{pid}
	if !shell.runs("sh") {
		t.Fatalf("the command's shell (pid %d) does not run", pid)
	}

	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not first.wait, which reads the run's output to its end: on the
	// command's side the pipe is open while the command runs.
	if _, err := first.cmd.Process.Wait(); err != nil {
		t.Fatal(err)
	}
	// The lock is free again within the crash grace (about a second): the
	// second run's command starts then, and it must find the first's gone.
	second := cli.start("run", "--name", name, "--wait", "20s", "--", "sh", "-c", "echo started; exec sleep 1000")
	second.waitLine("started")
	if shell.runs("sh") || job.alive() {
		beats, _ := os.ReadFile(heartbeat)
		t.Fatalf("the second holder's command runs while the SIGKILLed run's command (shell %d alive: %v) or its job (%d alive: %v) still runs; "+
			"its heartbeat has %d lines", shell.pid, shell.runs("sh"), job.pid, job.alive(), strings.Count(string(beats), "\n"))
	}
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := second.wait(time.Minute); code != 128+int(syscall.SIGTERM) {
		t.Errorf("second run: exit %d, want %d\nstderr: %s", code, 128+int(syscall.SIGTERM), second.stderr.String())
	}
}

// testSemaphoreSlots runs two commands at once under a semaphore of two:
// they see different slots (SQLLOCK_SLOT), each with its slot's token.
func testSemaphoreSlots(t *testing.T, cli *sqllockCLI, name string) {
	t.Helper()
	slots := map[string]bool{}
	var runs []*process
	for range 2 {
		p := cli.start("run", "--limit", "2", "--name", name, "--", "sh", "-c", `echo "slot=$SQLLOCK_SLOT token=$SQLLOCK_TOKEN"; exec sleep 1000`)
		runs = append(runs, p)
		var line string
		select {
		case line = <-p.lines:
		case <-time.After(time.Minute):
			t.Fatalf("no output from run --limit 2; stderr: %s", p.stderr.String())
		}
		var slot string
		var token int64
		if _, err := fmt.Sscanf(line, "slot=%s token=%d", &slot, &token); err != nil || token < 1 || (slot != "0" && slot != "1") {
			t.Fatalf("run --limit 2: the command saw %q, want a slot 0 or 1 and a token", line)
		}
		slots[slot] = true
	}
	if len(slots) != 2 {
		t.Errorf("two commands holding permits at once saw slots %v, want 0 and 1", slots)
	}
	for _, p := range runs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(time.Minute); code != 128+int(syscall.SIGTERM) {
			t.Errorf("run --limit 2: exit %d after SIGTERM\nstderr: %s", code, p.stderr.String())
		}
	}
}

// readOnlyDSN is the sqllock DSN of tg's database on sessions that cannot
// write: PostgreSQL's default_transaction_read_only, MariaDB's
// tx_read_only (MySQL's transaction_read_only), set through the DSN.
func readOnlyDSN(t *testing.T, tg testdb.Target, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	switch {
	case tg.Dialect == dblock.Postgres:
		q.Set("default_transaction_read_only", "on")
	case testdb.IsMariaDB(t, tg):
		q.Set("tx_read_only", "1")
	default:
		q.Set("transaction_read_only", "1")
	}
	u.RawQuery = q.Encode()
	return u.String()
}
