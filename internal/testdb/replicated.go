package testdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/migrations"
)

// Replicated is a PostgreSQL primary and a hot standby streaming from it
// (asynchronous replication, as most fleets run), servers of the test's
// own. The cluster is made by initdb in a temporary folder, and the
// standby is a copy made by pg_basebackup. Each runs on a free port of
// 127.0.0.1; both are stopped and removed when the test ends. Running as root, the servers run as the
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

// ReplicatedOption configures NewReplicated.
type ReplicatedOption func(*replicatedConfig)

type replicatedConfig struct{ synchronous bool }

// Synchronous makes the standby synchronous: the primary's
// synchronous_standby_names names it ('*') and synchronous_commit is on,
// so a commit is acknowledged only once the standby has flushed its WAL.
// A commit made while the replication is cut (CutReplication) waits until
// the primary dies, and is never acknowledged.
func Synchronous() ReplicatedOption { return func(c *replicatedConfig) { c.synchronous = true } }

// NewReplicated starts a primary and a standby streaming from it, and
// migrates the primary.
func NewReplicated(t testing.TB, opts ...ReplicatedOption) *Replicated {
	t.Helper()
	var cfg replicatedConfig
	for _, o := range opts {
		o(&cfg)
	}
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
	if cfg.synchronous {
		r.makeSynchronous(t)
	}
	return r
}

// makeSynchronous turns synchronous replication on at the primary and
// waits until the standby is its synchronous standby.
func (r *Replicated) makeSynchronous(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		`ALTER SYSTEM SET synchronous_standby_names = '*'`,
		`ALTER SYSTEM SET synchronous_commit = 'on'`,
		`SELECT pg_reload_conf()`,
	} {
		if _, err := r.primaryDB.ExecContext(ctx, q); err != nil {
			t.Fatalf("testdb: %s: %v", q, err)
		}
	}
	deadline := time.Now().Add(replicatedWait)
	for {
		var sync bool
		if err := r.primaryDB.QueryRowContext(ctx,
			`SELECT EXISTS (SELECT 1 FROM pg_stat_replication WHERE sync_state = 'sync')`).Scan(&sync); err != nil {
			t.Fatalf("testdb: the primary's replication state: %v", err)
		}
		if sync {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testdb: the standby did not become synchronous within %v", replicatedWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
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
// does. It waits until the standby has replayed everything the primary
// wrote, then shuts the primary down fast (sessions are ended,
// transactions in progress rolled back). Then it waits until the standby
// has replayed the primary's shutdown checkpoint too, the last record it
// wrote. So nothing committed on the
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
// standby, which goes on waiting for more. Were it to give up on the
// stream (wal_receiver_timeout, a minute) and connect again, a new
// walsender could still send it nothing: the replication slot is held by
// a stopped one.
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
