package torture_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/testdb"
)

// server is what the suite does to the database server itself, besides
// restarting it: it kills workers' sessions and switches the server
// read-only and back. Workers' sessions are told apart by their
// application_name on PostgreSQL, and on MySQL by their user: a user of
// their own, without the privilege to bypass read_only that root has.
type server struct {
	t     *testing.T
	tg    testdb.Target
	names []string // the run's lock names, whose holders' markers it finds
	// password of workerUser (MySQL), fresh each run.
	password string
	readOnly bool
}

const (
	// workerApp is the PostgreSQL application_name of workers' sessions.
	workerApp = "sqllock-torture"
	// workerUser is the MySQL user workers connect as, at these hosts.
	workerUser = "sqllock_torture"
)

var workerUserHosts = []string{"%", "localhost"}

// readOnlyWait bounds how long the server takes to switch, once told.
const readOnlyWait = 10 * time.Second

func newServer(t *testing.T, tg testdb.Target, names []string) *server {
	t.Helper()
	s := &server{t: t, tg: tg, names: names}
	s.ensureWritable()
	if tg.Dialect == dblock.MySQL {
		s.createWorkerUser()
	}
	t.Cleanup(func() {
		if s.readOnly {
			s.setReadOnly(false)
		}
		if tg.Dialect == dblock.MySQL {
			for _, host := range workerUserHosts {
				s.exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%s'", workerUser, host))
			}
		}
	})
	return s
}

func (s *server) exec(stmt string, args ...any) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.tg.DB.ExecContext(ctx, stmt, args...); err != nil {
		s.t.Fatalf("%s: %s: %v", s.tg.Name, stmt, err)
	}
}

// dbName is the MySQL database of the DSN, checked to be safe to quote.
var dbNameOK = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// createWorkerUser (re)creates workerUser with a fresh password and the
// privileges an application has on the lock tables: reading and writing
// rows, nothing global.
func (s *server) createWorkerUser() {
	t := s.t
	cfg, err := mysql.ParseDSN(s.tg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if !dbNameOK.MatchString(cfg.DBName) {
		t.Fatalf("MySQL database %q: want letters, digits and _ only", cfg.DBName)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	s.password = hex.EncodeToString(b[:])
	for _, host := range workerUserHosts {
		user := fmt.Sprintf("'%s'@'%s'", workerUser, host)
		s.exec("DROP USER IF EXISTS " + user)
		s.exec("CREATE USER " + user + " IDENTIFIED BY '" + s.password + "'")
		s.exec("GRANT SELECT, INSERT, UPDATE, DELETE ON `" + cfg.DBName + "`.* TO " + user)
	}
}

// workerDSN is dsn (the server's, or a proxy's or PgBouncer's) as workers
// use it: with workerApp on PostgreSQL, as workerUser on MySQL.
func (s *server) workerDSN(dsn string) string {
	if s.tg.Dialect == dblock.Postgres {
		return withParam(dsn, "application_name", workerApp)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		s.t.Fatal(err)
	}
	cfg.User, cfg.Passwd = workerUser, s.password
	return cfg.FormatDSN()
}

// withParam sets a parameter of a PostgreSQL DSN, URL or keyword/value.
func withParam(dsn, key, value string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + key + "=" + value // a later keyword overrides an earlier one
}

// pgMarkerSessions selects the workers' sessions, and tells those that
// hold the session marker of a lock held now: a row of one of the run's
// names, or one a lock kind derives from it (a semaphore's slot, a
// read/write lock's reader or writer: the name, lockinput.KindSeparator and
// a suffix). $1: the run's names; $2: workerApp; $3:
// lockinput.KindSeparator.
const pgMarkerSessions = `
WITH markers AS (
    SELECT DISTINCT l.pid
    FROM dblock_locks d
    JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND l.classid = (d.session_key >> 32)::oid AND l.objid = (d.session_key & 4294967295)::oid
    WHERE split_part(d.name, $3, 1) = ANY($1) AND d.session_key <> 0 AND d.session_token = d.token
      AND d.expires_at > clock_timestamp()
)
SELECT a.pid, a.pid IN (SELECT pid FROM markers)
FROM pg_stat_activity a
WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
  AND (a.application_name = $2 OR a.pid IN (SELECT pid FROM markers))`

// workerSession is a session of a worker on the server: its PostgreSQL
// backend pid or MySQL connection id, and whether it holds the marker of a
// lock held now.
type workerSession struct {
	id     int64
	marker bool
}

// killSessions has the server kill the sessions that hold the session
// marker of a lock held now, and each other session of the workers with
// even odds: their lock pools', clock pools', session connections, and
// PgBouncer's server connections they use. It returns how many it killed,
// and how many of those held a marker.
func (s *server) killSessions() (killed, markers int) {
	t := s.t
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var sessions []workerSession
	if s.tg.Dialect == dblock.Postgres {
		rows, err := s.tg.DB.QueryContext(ctx, pgMarkerSessions, s.names, workerApp, lockinput.KindSeparator)
		if err != nil {
			t.Fatalf("finding sessions to kill: %v", err)
		}
		for rows.Next() {
			var se workerSession
			if err := rows.Scan(&se.id, &se.marker); err != nil {
				t.Fatal(err)
			}
			sessions = append(sessions, se)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			t.Fatalf("finding sessions to kill: %v", err)
		}
	} else {
		sessions = s.myWorkerSessions(ctx)
	}
	for _, se := range sessions {
		if !se.marker && mathrand.IntN(2) == 0 {
			continue
		}
		if s.kill(ctx, se.id) {
			killed++
			if se.marker {
				markers++
			}
		}
	}
	return killed, markers
}

// myWorkerSessions lists the MySQL sessions of workerUser, telling those
// that hold the marker of a lock held now.
func (s *server) myWorkerSessions(ctx context.Context) []workerSession {
	t := s.t
	// The rows of the run's names and those the lock kinds derive from
	// them, as pgMarkerSessions.
	args := []any{lockinput.KindSeparator}
	for _, n := range s.names {
		args = append(args, n)
	}
	q := `SELECT DISTINCT IS_USED_LOCK(CONCAT('sqllock.', session_key)) FROM dblock_locks
WHERE SUBSTRING_INDEX(name, ?, 1) IN (?` + strings.Repeat(", ?", len(s.names)-1) + `) AND session_key <> 0
  AND session_token = token AND expires_at > UTC_TIMESTAMP(6)`
	markerIDs := map[int64]bool{}
	if err := queryEach(ctx, s.tg.DB, q, args, func(rows *sql.Rows) error {
		var id sql.NullInt64
		if err := rows.Scan(&id); err != nil || !id.Valid {
			return err
		}
		markerIDs[id.Int64] = true
		return nil
	}); err != nil {
		t.Fatalf("finding marker sessions: %v", err)
	}
	var out []workerSession
	q = `SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ? AND ID <> CONNECTION_ID()`
	if err := queryEach(ctx, s.tg.DB, q, []any{workerUser}, func(rows *sql.Rows) error {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		out = append(out, workerSession{id: id, marker: markerIDs[id]})
		return nil
	}); err != nil {
		t.Fatalf("finding worker sessions: %v", err)
	}
	return out
}

func queryEach(ctx context.Context, db *sql.DB, q string, args []any, each func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	for rows.Next() {
		if err := each(rows); err != nil {
			_ = rows.Close()
			return err
		}
	}
	return errors.Join(rows.Err(), rows.Close())
}

// kill has the server end session id; false if it had ended already.
func (s *server) kill(ctx context.Context, id int64) bool {
	if s.tg.Dialect == dblock.Postgres {
		var ok bool
		if err := s.tg.DB.QueryRowContext(ctx, `SELECT pg_terminate_backend($1)`, id).Scan(&ok); err != nil {
			s.t.Fatalf("pg_terminate_backend(%d): %v", id, err)
		}
		return ok
	}
	// KILL takes no placeholder; id is the server's own number.
	_, err := s.tg.DB.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10))
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) && myErr.Number == 1094 { // ER_NO_SUCH_THREAD: gone already
		return false
	}
	if err != nil {
		s.t.Fatalf("KILL %d: %v", id, err)
	}
	return true
}

// setReadOnly makes the whole server refuse writes from the workers, or
// accept them again, and waits until it does: PostgreSQL's
// default_transaction_read_only for every session (ALTER SYSTEM, then a
// configuration reload), MySQL's read_only, which binds workerUser but
// not root.
func (s *server) setReadOnly(on bool) {
	t := s.t
	ctx, cancel := context.WithTimeout(context.Background(), readOnlyWait)
	defer cancel()
	s.readOnly = on
	if s.tg.Dialect == dblock.Postgres {
		stmt := "ALTER SYSTEM RESET default_transaction_read_only"
		if on {
			stmt = "ALTER SYSTEM SET default_transaction_read_only = on"
		}
		s.exec(stmt)
		s.exec("SELECT pg_reload_conf()")
	} else {
		s.exec("SET GLOBAL read_only = " + map[bool]string{true: "ON", false: "OFF"}[on])
	}
	for {
		if ro, err := s.isReadOnly(ctx); err == nil && ro == on {
			return
		} else if ctx.Err() != nil {
			t.Fatalf("%s did not switch to read-only=%v within %v: %v", s.tg.Name, on, readOnlyWait, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *server) isReadOnly(ctx context.Context) (bool, error) {
	q := `SELECT current_setting('default_transaction_read_only') = 'on'`
	if s.tg.Dialect == dblock.MySQL {
		q = `SELECT @@global.read_only = 1`
	}
	var ro bool
	err := s.tg.DB.QueryRowContext(ctx, q).Scan(&ro)
	return ro, err
}

// ensureWritable undoes a read-only switch that a run killed half way
// left behind (ALTER SYSTEM persists it), and says so.
func (s *server) ensureWritable() {
	ctx, cancel := context.WithTimeout(context.Background(), readOnlyWait)
	defer cancel()
	ro, err := s.isReadOnly(ctx)
	if err != nil {
		s.t.Fatalf("%s: is the server read-only: %v", s.tg.Name, err)
	}
	if ro {
		s.t.Logf("%s was read-only when the run began (a run stopped during its read-only switch?): switching it back", s.tg.Name)
		s.setReadOnly(false)
	}
}

// PgBouncer in front of the PostgreSQL under test: SQLLOCK_PGBOUNCER_DSN,
// or the one `.ci/pgbouncer start` runs.
const (
	envPgBouncer        = "SQLLOCK_PGBOUNCER_DSN"
	defaultPgBouncerDSN = "postgres://root@127.0.0.1:6432/test"
)

// pgBouncer returns PgBouncer's DSN as a Target (for DSNVia), after
// proving that it answers and that the server behind it is tg's. It fails
// the test, never skips, when it cannot.
func pgBouncer(t *testing.T, tg testdb.Target) testdb.Target {
	t.Helper()
	dsn := os.Getenv(envPgBouncer)
	if dsn == "" {
		dsn = defaultPgBouncerDSN
	}
	via, err := serverIdentity(dsn)
	if err != nil {
		t.Fatalf("PgBouncer unreachable at %s: %v\n\tthe torture suite runs workers through it: start it with "+
			"`.ci/pgbouncer start` (transaction pooling on 127.0.0.1:6432 in front of the local PostgreSQL), "+
			"or set %s to one in front of %s", dsn, err, envPgBouncer, tg.HostPort())
	}
	want, err := serverIdentity(tg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if via != want {
		t.Fatalf("PgBouncer at %s reaches another server (database and start time %q) than %s (%q): "+
			"set %s to one in front of it", dsn, via, tg.HostPort(), want, envPgBouncer)
	}
	return testdb.Target{Name: "pgbouncer", Dialect: dblock.Postgres, DriverName: "pgx", DSN: dsn}
}

// serverIdentity tells a PostgreSQL server, and the database, that dsn
// reaches: the database's name and the server's start time. It uses the
// simple protocol, so that it works through PgBouncer whatever the pooled
// workers test.
func serverIdentity(dsn string) (string, error) {
	db, err := sql.Open("pgx", withParam(dsn, "default_query_exec_mode", "simple_protocol"))
	if err != nil {
		return "", err
	}
	defer func() { _ = db.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var id string
	err = db.QueryRowContext(ctx, `SELECT current_database() || ' ' || pg_postmaster_start_time()::text`).Scan(&id)
	return id, err
}

// envRestartPgBouncer is the shell command that starts PgBouncer again
// when it died mid-run; by default the one that started it in CI.
const (
	envRestartPgBouncer     = "SQLLOCK_TORTURE_RESTART_PGBOUNCER"
	defaultRestartPgBouncer = "cd ../.. && .ci/pgbouncer start"
)

// keepPoolerUp starts PgBouncer again if it died, counting it, and fails
// the test if that does not bring it back. PgBouncer 1.18 (Debian 12's)
// exits under this suite's faults within minutes of soaking: "FATAL ...
// server_proto(): server in bad state: 11" or "disconnect_client(): bad
// client state: 0" in its log, crashes on a cancel request that meets a
// killed server session or a client gone first (pgbouncer/pgbouncer#822
// and #801, fixed upstream in 2023). pgx sends a cancel request whenever
// a context ends a query, and forupdate when an Acquire stops waiting. A
// pooler that crashes is one more fault of the run for the library; the
// summary counts them.
func (r *run) keepPoolerUp() {
	if r.bouncer.DSN == "" || poolerListens(r.bouncer.HostPort()) {
		return
	}
	cmd := os.Getenv(envRestartPgBouncer)
	if cmd == "" {
		cmd = defaultRestartPgBouncer
	}
	r.t.Logf("PgBouncer at %s died mid-run (see its log); starting it again: %s", r.bouncer.HostPort(), cmd)
	if out, err := exec.Command("bash", "-c", cmd).CombinedOutput(); err != nil {
		r.t.Fatalf("PgBouncer died mid-run and %s=%q did not start it again: %v\n%s", envRestartPgBouncer, cmd, err, out)
	}
	for range 300 {
		if poolerListens(r.bouncer.HostPort()) {
			r.counts.poolerCrashes++
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.t.Fatalf("PgBouncer did not listen on %s within 30 s of %q", r.bouncer.HostPort(), cmd)
}

// poolerListens tells whether PgBouncer accepts connections; whether the
// server behind it answers does not matter here.
func poolerListens(hostPort string) bool {
	c, err := net.DialTimeout("tcp", hostPort, 5*time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func restartEnv(tg testdb.Target) string {
	return "SQLLOCK_TORTURE_RESTART_" + strings.ToUpper(tg.Name)
}

// restartIsNoop reports whether the restart command is `true`, which
// developers use to run the suite beside other tests.
func restartIsNoop(tg testdb.Target) bool {
	return strings.TrimSpace(os.Getenv(restartEnv(tg))) == "true"
}

// restartServer restarts a database server and waits until it answers.
func restartServer(t *testing.T, tg testdb.Target) {
	t.Helper()
	cmd := map[dblock.Dialect]string{
		dblock.Postgres: `pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n1)" main restart`,
		// By the server's pid file (/etc/mysql/my.cnf), not the program's
		// name: another mariadbd on the machine (a developer's own) would
		// make start-stop-daemon think the server runs, and start nothing.
		dblock.MySQL: `mysqladmin -h127.0.0.1 -uroot shutdown && ` +
			`for i in $(seq 300); do [ -e /run/mysqld/mysqld.pid ] || break; sleep 0.1; done; ` +
			`start-stop-daemon --start --oknodo --background --pidfile /run/mysqld/mysqld.pid --exec /usr/sbin/mariadbd`,
	}[tg.Dialect]
	if v := os.Getenv(restartEnv(tg)); v != "" {
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
