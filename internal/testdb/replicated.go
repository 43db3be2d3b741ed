package testdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/migrations"
)

// Replicated is a PostgreSQL primary and a hot standby streaming from it
// (asynchronous replication, as most fleets run), servers of the test's
// own: a cluster made by initdb in a temporary folder, the standby a copy
// made by pg_basebackup, each on a free port of 127.0.0.1, both stopped
// and removed when the test ends. Running as root, the servers run as the
// postgres user. They take the programs in SQLLOCK_PG_BIN, or the newest
// /usr/lib/postgresql/<major>/bin; without them the test fails and says
// how to get them.
//
// A test switches the roles over as an operator would: StopPrimary, then
// Promote (or Switchover, both at once). An unplanned failover that loses
// commits: CutReplication, commits on the primary, KillPrimary, Promote.
type Replicated struct {
	// Target is the pair as one database: its DSN lists the primary, then
	// the standby, with target_session_attrs=read-write, so that a pool on
	// it connects to whichever of them takes writes; DB is such a pool,
	// migrated with migrations.Up on the primary, closed when the test
	// ends.
	Target Target

	tools     pgTools
	dir       string
	primary   *pgServer
	standby   *pgServer
	primaryDB *sql.DB // the primary alone
	standbyDB *sql.DB // the standby alone, promoted or not
	cutAt     string  // the primary's WAL position at CutReplication, if any
}

// replicatedWait bounds the harness's waits for replication to catch up
// and for a promotion: a hang fails the test instead of the binary.
const replicatedWait = time.Minute

// NewReplicated starts a primary and a standby streaming from it, and
// migrates the primary.
func NewReplicated(t testing.TB) *Replicated {
	t.Helper()
	tools, err := newPGTools()
	if err != nil {
		t.Fatalf("testdb: a primary and standby of the test's own: %v", err)
	}
	dir, err := os.MkdirTemp("", "sqllock-replicated-")
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	// Registered first, so that it runs after the servers have stopped.
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := tools.ownDir(dir); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	r := &Replicated{tools: tools, dir: dir}

	primaryData := filepath.Join(dir, "primary")
	if _, err := tools.run(dir, "initdb", "-D", primaryData, "--username=root", "--auth=trust",
		"--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"); err != nil {
		t.Fatalf("testdb: %v\n\tto fix: %s", err, pgHowTo)
	}
	primaryPort := freePort(t)
	r.primary = r.start(t, "primary", primaryData, primaryPort)

	// -R makes it a standby of the primary (standby.signal and
	// primary_conninfo), with a replication slot, so that the primary
	// keeps the WAL the standby has not received yet.
	standbyData := filepath.Join(dir, "standby")
	if _, err := tools.run(dir, "pg_basebackup", "-h", "127.0.0.1", "-p", fmt.Sprint(primaryPort), "-U", "root",
		"-D", standbyData, "-R", "-X", "stream", "-C", "-S", "standby", "-c", "fast", "--no-sync"); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	// The primary listens on its port by now: freePort cannot return it.
	r.standby = r.start(t, "standby", standbyData, freePort(t))

	one := Target{Name: "postgres", Dialect: dblock.Postgres, DriverName: "pgx"}
	r.primaryDB = Open(t, one, r.primary.dsn())
	r.standbyDB = Open(t, one, r.standby.dsn())
	r.Target = one
	r.Target.DSN = r.DSN("read-write")
	r.Target.DB = Open(t, r.Target, r.Target.DSN)
	ctx, cancel := context.WithTimeout(context.Background(), replicatedWait)
	defer cancel()
	if err := migrations.Up(ctx, r.Target.DB); err != nil {
		t.Fatalf("testdb: migrations.Up on the primary: %v", err)
	}
	r.waitReplayed(t, r.currentLSN(t), false)
	return r
}

// start starts one server, stopped (at once: its data is thrown away)
// when the test ends, and its log shown if the test failed.
func (r *Replicated) start(t testing.TB, name, data string, port int) *pgServer {
	t.Helper()
	s, err := startPGServer(r.tools, name, data, r.dir, port, filepath.Join(r.dir, name+".log"))
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	t.Cleanup(func() {
		if err := s.stop(syscall.SIGQUIT); err != nil {
			t.Errorf("testdb: %v", err)
		}
		if t.Failed() {
			t.Logf("testdb: the end of the %s's log (port %d):\n%s", s.name, s.port, tail(s.log))
		}
	})
	return s
}

// DSN lists both servers, the primary first, for pgx (keyword/value form)
// with target_session_attrs=attrs: "read-write" (or "primary") connects to
// the one that takes writes, "any" to the first that answers, which is the
// standby while the primary is down.
func (r *Replicated) DSN(attrs string) string {
	return fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=root dbname=postgres sslmode=disable target_session_attrs=%s",
		r.primary.port, r.standby.port, attrs)
}

// StandbyDSN is the standby's DSN alone.
func (r *Replicated) StandbyDSN() string { return r.standby.dsn() }

// Switchover is a planned switchover: StopPrimary, then Promote.
func (r *Replicated) Switchover(t testing.TB) {
	t.Helper()
	r.StopPrimary(t)
	r.Promote(t)
}

// StopPrimary shuts the primary down cleanly, as a planned switchover
// does: once the standby has replayed everything the primary wrote, a fast
// shutdown (sessions are ended, transactions in progress rolled back),
// and then a wait until the standby has replayed the primary's shutdown
// checkpoint too, the last record it wrote. So nothing committed on the
// primary is missing on the standby. The standby stays a read-only
// standby until Promote.
func (r *Replicated) StopPrimary(t testing.TB) {
	t.Helper()
	r.waitReplayed(t, r.currentLSN(t), false)
	if err := r.primary.stop(syscall.SIGINT); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	out, err := r.tools.run(r.dir, "pg_controldata", "-D", r.primary.data)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	if m := controlState.FindStringSubmatch(out); m == nil || m[1] != "shut down" {
		t.Fatalf("testdb: the primary did not shut down cleanly; pg_controldata says:\n%s", out)
	}
	m := controlCheckpoint.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("testdb: no checkpoint location in pg_controldata's output:\n%s", out)
	}
	// The location is where the checkpoint record starts: replayed past it
	// means replayed it.
	r.waitReplayed(t, m[1], true)
}

var (
	controlState      = regexp.MustCompile(`(?m)^Database cluster state:\s+(.+)$`)
	controlCheckpoint = regexp.MustCompile(`(?m)^Latest checkpoint location:\s+([0-9A-F]+/[0-9A-F]+)$`)
)

// Promote makes the standby the primary and returns once it takes writes.
func (r *Replicated) Promote(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), replicatedWait)
	defer cancel()
	var promoted bool
	// pg_promote waits (up to its second argument, in seconds) until the
	// promotion has finished.
	if err := r.standbyDB.QueryRowContext(ctx, `SELECT pg_promote(true, $1)`, int(replicatedWait.Seconds())).Scan(&promoted); err != nil {
		t.Fatalf("testdb: promote the standby: %v", err)
	}
	if !promoted {
		t.Fatalf("testdb: the standby was not promoted within %v\n%s", replicatedWait, tail(r.standby.log))
	}
}

// currentLSN is the primary's WAL position now.
func (r *Replicated) currentLSN(t testing.TB) string {
	t.Helper()
	var lsn string
	if err := r.primaryDB.QueryRowContext(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		t.Fatalf("testdb: the primary's WAL position: %v", err)
	}
	return lsn
}

// waitReplayed waits until the standby has replayed the WAL up to lsn
// (beyond it, when past is set).
func (r *Replicated) waitReplayed(t testing.TB, lsn string, past bool) {
	t.Helper()
	q := `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn, pg_last_wal_replay_lsn()::text`
	if past {
		q = `SELECT pg_last_wal_replay_lsn() > $1::pg_lsn, pg_last_wal_replay_lsn()::text`
	}
	deadline := time.Now().Add(replicatedWait)
	for {
		var done bool
		var replayed string
		if err := r.standbyDB.QueryRowContext(context.Background(), q, lsn).Scan(&done, &replayed); err != nil {
			t.Fatalf("testdb: the standby's replay position: %v", err)
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testdb: the standby replayed up to %s, not %s, within %v\n%s", replayed, lsn, replicatedWait, tail(r.standby.log))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// CutReplication stops the WAL from reaching the standby, as a partition
// between the two servers would, without either of them ending the
// stream: first it waits until the standby has replayed everything the
// primary has written, so the cut falls there, then it stops (SIGSTOP)
// the primary's walsenders. Commits on the primary go on being
// acknowledged (replication is asynchronous) but never reach the
// standby, which goes on waiting for more: were it to give up on the
// stream (wal_receiver_timeout, a minute) and connect again, the
// replication slot, still held by a stopped walsender, would keep a new
// walsender from sending it anything.
//
// KillPrimary kills the stopped walsenders with the primary; if the test
// ends before, they are resumed (SIGCONT) before the servers stop, so
// that they can stop.
func (r *Replicated) CutReplication(t testing.TB) {
	t.Helper()
	r.waitReplayed(t, r.currentLSN(t), false)
	rows, err := r.primaryDB.QueryContext(context.Background(), `SELECT pid FROM pg_stat_replication`)
	if err != nil {
		t.Fatalf("testdb: the primary's walsenders: %v", err)
	}
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			t.Fatalf("testdb: the primary's walsenders: %v", err)
		}
		pids = append(pids, pid)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatalf("testdb: the primary's walsenders: %v", err)
	}
	if len(pids) == 0 {
		t.Fatalf("testdb: the primary has no walsender to stop: the standby is not streaming\n%s", tail(r.standby.log))
	}
	postmaster := r.primary.cmd.Process.Pid
	t.Cleanup(func() {
		for _, pid := range pids {
			// Only while it is still the primary's: once killed, its pid
			// may be someone else's.
			if st, err := readProcStat(pid); err == nil && st.ppid == postmaster {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		}
	})
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("testdb: stop walsender %d: %v", pid, err)
		}
	}
	// kill returns before the signal has taken effect: until the
	// walsenders are stopped, they may send what is committed next.
	for _, pid := range pids {
		if err := waitProc(pid, func(st procStat) bool { return st.state == 'T' || st.state == 't' }); err != nil {
			t.Fatalf("testdb: walsender %d: %v", pid, err)
		}
	}
	r.cutAt = r.currentLSN(t)
}

// Unreplicated is how many bytes of WAL the primary has written that the
// standby has not received: after CutReplication and commits on the
// primary, more than zero, and all of it is lost if the primary dies.
func (r *Replicated) Unreplicated(t testing.TB) int64 {
	t.Helper()
	var received string
	if err := r.standbyDB.QueryRowContext(context.Background(), `SELECT pg_last_wal_receive_lsn()::text`).Scan(&received); err != nil {
		t.Fatalf("testdb: the standby's receive position: %v", err)
	}
	var behind int64
	if err := r.primaryDB.QueryRowContext(context.Background(),
		`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint`, received).Scan(&behind); err != nil {
		t.Fatalf("testdb: the primary's WAL position: %v", err)
	}
	return behind
}

// KillPrimary crashes the primary, as a power cut or the kernel's OOM
// killer would: its postmaster and every process it has started are
// killed (SIGKILL), with no shutdown checkpoint and no word to the
// clients, whose connections break. It returns once they are all gone
// and the primary's port refuses connections. What the standby had not
// received is lost: after CutReplication, everything committed since (it
// fails the test if the standby received any of it: the cut leaked).
// Promote then makes the standby the primary.
func (r *Replicated) KillPrimary(t testing.TB) {
	t.Helper()
	s := r.primary
	select {
	case <-s.exited:
		t.Fatalf("testdb: the primary has exited already: %v", s.err)
	default:
	}
	shm := primaryShm(s.data)
	postmaster := s.cmd.Process.Pid
	// Stopped first, the postmaster starts no process while its children
	// are found and killed, and restarts none when they die.
	if err := syscall.Kill(postmaster, syscall.SIGSTOP); err != nil {
		t.Fatalf("testdb: stop the primary's postmaster: %v", err)
	}
	if err := waitProc(postmaster, func(st procStat) bool { return st.state == 'T' || st.state == 't' }); err != nil {
		t.Fatalf("testdb: the primary's postmaster: %v", err)
	}
	children, err := childrenOf(postmaster)
	if err != nil {
		t.Fatalf("testdb: the primary's processes: %v", err)
	}
	for _, pid := range children {
		// SIGKILL ends stopped processes too (the cut's walsenders).
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("testdb: kill the primary's process %d: %v", pid, err)
		}
	}
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("testdb: kill the primary's postmaster: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(pgServerStop):
		t.Fatalf("testdb: the primary's postmaster still runs %v after SIGKILL", pgServerStop)
	}
	for _, pid := range children {
		// Gone, or a zombie waiting for init to reap it: dead either way,
		// its sockets closed.
		if err := waitProc(pid, func(st procStat) bool { return st.state == 'Z' || st.state == 'X' }); err != nil {
			t.Fatalf("testdb: the primary's process %d after SIGKILL: %v", pid, err)
		}
	}
	if err := waitRefused(s.port); err != nil {
		t.Fatalf("testdb: the killed primary's port: %v", err)
	}
	if shm >= 0 {
		// A killed postmaster leaves its small System V segment behind
		// (its children are gone: nothing is attached to it).
		if _, _, errno := syscall.Syscall(syscall.SYS_SHMCTL, uintptr(shm), ipcRmid, 0); errno != 0 && errno != syscall.EINVAL && errno != syscall.EIDRM {
			t.Logf("testdb: remove the killed primary's shared memory segment %d: %v", shm, errno)
		}
	}
	if r.cutAt != "" {
		var leaked bool
		var received string
		if err := r.standbyDB.QueryRowContext(context.Background(),
			`SELECT pg_last_wal_receive_lsn() > $1::pg_lsn, pg_last_wal_receive_lsn()::text`, r.cutAt).Scan(&leaked, &received); err != nil {
			t.Fatalf("testdb: the standby's receive position: %v", err)
		}
		if leaked {
			t.Fatalf("testdb: the standby received WAL up to %s, past the cut at %s: CutReplication leaked", received, r.cutAt)
		}
	}
}

// ipcRmid is shmctl's IPC_RMID command.
const ipcRmid = 0

// primaryShm is the System V shared memory segment of the server of data,
// from its postmaster.pid (line 7: key and id), or -1.
func primaryShm(data string) int {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return -1
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 {
		return -1
	}
	fields := strings.Fields(lines[6])
	if len(fields) != 2 {
		return -1
	}
	id, err := strconv.Atoi(fields[1])
	if err != nil {
		return -1
	}
	return id
}

// procStat is what the harness reads of a process in /proc/<pid>/stat.
type procStat struct {
	state byte // R, S, D, T (stopped), t, Z (zombie), X, ...
	ppid  int
}

// readProcStat reads pid's state and parent; os.ErrNotExist once the
// process is gone.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses,
	// so the fields are counted from the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 2 || len(fields[0]) != 1 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return procStat{state: fields[0][0], ppid: ppid}, nil
}

// waitProc waits, at most pgServerStop, until pid is in a state done
// accepts or gone (gone counts as done).
func waitProc(pid int, done func(procStat) bool) error {
	deadline := time.Now().Add(pgServerStop)
	for {
		st, err := readProcStat(pid)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if done(st) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still in state %c after %v", st.state, pgServerStop)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var children []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProcStat(child); err == nil && st.ppid == pid {
			children = append(children, child)
		}
	}
	return children, nil
}

// waitRefused waits, at most pgServerStop, until nothing accepts
// connections on port of 127.0.0.1.
func waitRefused(port int) error {
	deadline := time.Now().Add(pgServerStop)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err != nil {
			return nil
		}
		_ = c.Close()
		if time.Now().After(deadline) {
			return fmt.Errorf("port %d still accepts connections %v after the kill", port, pgServerStop)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
