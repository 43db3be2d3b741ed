// Package testdb is sqllock's test harness: it hands tests the real
// PostgreSQL and MySQL/MariaDB databases, migrated, and tools to break them
// (a TCP proxy that cuts connections, child processes to SIGKILL).
//
// DSNs come from SQLLOCK_POSTGRES_DSN and SQLLOCK_MYSQL_DSN, defaulting to
// the local servers (DefaultPostgresDSN, DefaultMySQLDSN). When a server
// cannot be reached, the harness tries a testcontainers-go container (unless
// SQLLOCK_NO_CONTAINERS is set); when that fails too, the test fails with a
// message saying which server to start or which variable to set. It never
// skips: a suite that passes without a database has tested nothing.
// SQLLOCK_TEST_DIALECTS=postgres (or mysql, or sqlite) is the one way to
// test a single database, chosen on purpose; the tests then log the ones
// left out. SQLite needs no server: each test gets a file of its own
// (SQLite, AllTargets).
//
// Behaviour tests run over both databases, or, when the behaviour needs no
// server feature, over SQLite too (AllTargets):
//
//	for _, tg := range testdb.Targets(t) {
//		t.Run(tg.Name, func(t *testing.T) {
//			name := testdb.Name(t) // a lock name no other test uses
//			...
//		})
//	}
//
// A test that is only the body of a child process (see Child) returns at
// once when it is not the child. It must not call t.Skip: skips are counted
// and reported, and a suite full of them hides real skips.
//
//	func TestChildHolder(t *testing.T) {
//		if !testdb.IsChild() {
//			return
//		}
//		...
//	}
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql" // driver "mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/migrations"
)

// Target is one real database under test.
type Target struct {
	Name       string // "postgres" or "mysql": use it as the t.Run name
	Dialect    dblock.Dialect
	DriverName string // "pgx" (jackc/pgx/v5/stdlib) or "mysql" (go-sql-driver/mysql)
	DSN        string // in the driver's format, TCP only (the Proxy needs a host:port)
	// DB is shared by the whole test binary and already migrated with
	// migrations.Up; tests must not close it.
	DB *sql.DB
}

// The default DSNs name the servers development machines and CI run. The
// MySQL one deliberately carries no parameters (no parseTime, no
// multiStatements): the library must work with a plain DSN.
const (
	DefaultPostgresDSN = "postgres://root@127.0.0.1:5432/test"
	DefaultMySQLDSN    = "root@tcp(127.0.0.1:3306)/test"
)

// sharedMaxConns sizes the shared pools for the many-goroutine tests while
// staying far below the servers' default limits (100 and 151 connections),
// which several test binaries share when go test runs packages in parallel.
const sharedMaxConns = 40

// pingTimeout is short because a local server answers at once or not at
// all; waiting longer only delays the failure message.
const pingTimeout = 5 * time.Second

// source is one database and the once-per-test-binary result of opening it.
type source struct {
	name    string
	dialect dblock.Dialect
	driver  string
	env     string // variable that overrides def
	def     string
	howTo   string // how to get this server when it is missing

	once   sync.Once
	target Target
	err    error
	conns  pgxConns // the pool's, to wait for when it is closed
}

var sources = []*source{
	{
		name: "postgres", dialect: dblock.Postgres, driver: "pgx",
		env: "SQLLOCK_POSTGRES_DSN", def: DefaultPostgresDSN,
		howTo: "start it with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start` " +
			"(or run .ci/run), or set SQLLOCK_POSTGRES_DSN to a reachable server, or make Docker available",
	},
	{
		name: "mysql", dialect: dblock.MySQL, driver: "mysql",
		env: "SQLLOCK_MYSQL_DSN", def: DefaultMySQLDSN,
		howTo: "start it with `start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd` " +
			"(or run .ci/run), or set SQLLOCK_MYSQL_DSN to a reachable server, or make Docker available",
	},
}

// Targets returns both databases, connected and migrated once per test
// binary. It fails the test (never skips) when either cannot be had.
//
// SQLLOCK_TEST_DIALECTS ("postgres", "mysql", "sqlite", or several,
// comma-separated) narrows that to the databases it names, for a run that means to test one
// database alone (the PostgreSQL version matrix, .ci/pg-matrix); each test
// then logs which database it leaves out. Unset or empty, it is both.
func Targets(t testing.TB) []Target {
	t.Helper()
	chosen, err := chosenDialects()
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	out := make([]Target, 0, len(sources))
	for _, s := range sources {
		if !chosen[s.name] {
			t.Logf("testdb: %s left out: %s=%s", s.name, dialectsEnv, os.Getenv(dialectsEnv))
			continue
		}
		s.once.Do(func() { s.target, s.err = s.open() })
		if s.err != nil {
			t.Fatalf("testdb: %v", s.err)
		}
		out = append(out, s.target)
	}
	return out
}

// dialectsEnv names the databases a run tests; see Targets.
const dialectsEnv = "SQLLOCK_TEST_DIALECTS"

// chosenDialects reads dialectsEnv: the set of source names it names, or
// every source when it is unset or empty. A name it does not know is an
// error, not ignored: a typo must not quietly test nothing.
func chosenDialects() (map[string]bool, error) {
	chosen := map[string]bool{}
	v := strings.TrimSpace(os.Getenv(dialectsEnv))
	if v == "" {
		for _, s := range sources {
			chosen[s.name] = true
		}
		chosen[SQLiteName] = true
		return chosen, nil
	}
	for name := range strings.SplitSeq(v, ",") {
		name = strings.TrimSpace(name)
		if name != SQLiteName && !slices.ContainsFunc(sources, func(s *source) bool { return s.name == name }) {
			return nil, fmt.Errorf("%s=%q: unknown database %q (want postgres, mysql, sqlite, or several, comma-separated)", dialectsEnv, v, name)
		}
		chosen[name] = true
	}
	return chosen, nil
}

// LeftOut reports whether SQLLOCK_TEST_DIALECTS leaves out the database
// named name ("postgres" or "mysql"), and logs it when it does. A test that
// needs one database in particular (MariaDB's sequence, say) and finds no
// target for it fails unless LeftOut says that was asked for.
func LeftOut(t testing.TB, name string) bool {
	t.Helper()
	chosen, err := chosenDialects()
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	if chosen[name] {
		return false
	}
	t.Logf("testdb: %s left out: %s=%s", name, dialectsEnv, os.Getenv(dialectsEnv))
	return true
}

func (s *source) open() (Target, error) {
	dsn, fromEnv := os.LookupEnv(s.env)
	if !fromEnv || dsn == "" {
		dsn = s.def
	}
	tg := Target{Name: s.name, Dialect: s.dialect, DriverName: s.driver, DSN: dsn}
	if _, err := tg.hostPort(); err != nil {
		return Target{}, fmt.Errorf("%s=%q: %v", s.env, dsn, err)
	}
	db, err := connect(s.driver, dsn, &s.conns)
	if err != nil {
		// Only the default server falls back to a container: a DSN the
		// user chose is what they want tested, so its failure is reported.
		if fromEnv {
			return Target{}, fmt.Errorf("%s unreachable at %s: %v\n\tto fix: correct or unset %s (unset, the local server %s is used)",
				s.name, tg.HostPort(), err, s.env, s.def)
		}
		cdsn, cerr := containerDSN(s.name)
		if cerr != nil {
			return Target{}, fmt.Errorf("%s unreachable at %s: %v\n\tto fix: %s\n\ttestcontainers fallback failed too: %v",
				s.name, tg.HostPort(), err, s.howTo, cerr)
		}
		tg.DSN = cdsn
		if db, err = connect(s.driver, cdsn, &s.conns); err != nil {
			return Target{}, fmt.Errorf("%s container unreachable at %s: %v", s.name, tg.HostPort(), err)
		}
	}
	db.SetMaxOpenConns(sharedMaxConns)
	db.SetMaxIdleConns(sharedMaxConns)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := migrations.Up(ctx, db); err != nil {
		_ = db.Close()
		return Target{}, fmt.Errorf("%s: migrations.Up: %v", s.name, err)
	}
	tg.DB = db
	return tg, nil
}

// connect opens a pool and proves the server answers, so an unreachable
// server is reported here rather than as a confusing first query failure.
func connect(driver, dsn string, conns *pgxConns) (*sql.DB, error) {
	db, err := openDB(driver, dsn, conns)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// Open returns a new pool for dsn (for example tg.DSNVia(proxy.Addr())),
// closed when the test ends, once its connections have closed (see
// pgxConns). It does not ping, so a test may open a pool through a proxy
// that is cut.
func Open(t testing.TB, tg Target, dsn string) *sql.DB {
	t.Helper()
	conns := new(pgxConns)
	db, err := openDB(tg.DriverName, dsn, conns)
	if err != nil {
		t.Fatalf("testdb: open %s: %v", tg.Name, err)
	}
	t.Cleanup(func() {
		_ = db.Close()
		if err := conns.wait(); err != nil {
			t.Error(err)
		}
	})
	return db
}

// maxNameLen keeps lock names well inside the lock tables' name column and
// any limit the library puts on names.
const maxNameLen = 200

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// Name returns a lock name no other test, run or process uses: the test's
// sanitized name (readable when inspecting the tables) and 64 random bits.
func Name(t testing.TB) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails since Go 1.24
	suffix := "-" + hex.EncodeToString(b[:])
	base := unsafeChars.ReplaceAllString(t.Name(), "_")
	if room := maxNameLen - len(suffix); len(base) > room {
		// Keep the end: the subtest names that tell siblings apart are there.
		base = base[len(base)-room:]
	}
	return base + suffix
}

// HostPort is the server's host:port from the DSN, for NewProxy.
func (tg Target) HostPort() string {
	hp, err := tg.hostPort()
	if err != nil {
		// open validated the DSN, so only a hand-made Target gets here.
		panic(fmt.Sprintf("testdb: %s DSN: %v", tg.Name, err))
	}
	return hp
}

func (tg Target) hostPort() (string, error) {
	var hp string
	switch tg.Dialect {
	case dblock.Postgres:
		cfg, err := pgconn.ParseConfig(tg.DSN)
		if err != nil {
			return "", err
		}
		hp = net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
	case dblock.MySQL:
		cfg, err := mysql.ParseDSN(tg.DSN)
		if err != nil {
			return "", err
		}
		if cfg.Net != "tcp" {
			return "", fmt.Errorf("network %q, want tcp", cfg.Net)
		}
		hp = cfg.Addr
	default:
		return "", fmt.Errorf("unknown dialect %q", tg.Dialect)
	}
	if host, _, err := net.SplitHostPort(hp); err != nil || strings.HasPrefix(host, "/") {
		return "", fmt.Errorf("server address %q is not TCP host:port (the fault-injection proxy needs one)", hp)
	}
	return hp, nil
}

// DSNVia is the DSN with the server address replaced by hostPort, so that
// a pool opened with it goes through a Proxy. Everything else (user,
// database, parameters) is kept.
func (tg Target) DSNVia(hostPort string) string {
	switch tg.Dialect {
	case dblock.Postgres:
		if u, err := url.Parse(tg.DSN); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
			u.Host = hostPort
			return u.String()
		}
		// Keyword/value form: a later keyword overrides an earlier one.
		host, port, _ := net.SplitHostPort(hostPort)
		return tg.DSN + " host=" + host + " port=" + port
	default:
		cfg, err := mysql.ParseDSN(tg.DSN)
		if err != nil {
			panic(fmt.Sprintf("testdb: %s DSN: %v", tg.Name, err))
		}
		cfg.Net, cfg.Addr = "tcp", hostPort
		return cfg.FormatDSN()
	}
}

// IsMariaDB tells MariaDB from MySQL 8.0 (false for PostgreSQL): they
// differ where sqllock's schema does (forupdate's token counter is a
// sequence on MariaDB, a table on MySQL 8.0).
func IsMariaDB(t testing.TB, tg Target) bool {
	t.Helper()
	if tg.Dialect != dblock.MySQL {
		return false
	}
	var maria bool
	if err := tg.DB.QueryRowContext(context.Background(), `SELECT VERSION() LIKE '%MariaDB%'`).Scan(&maria); err != nil {
		t.Fatalf("testdb: server version of %s: %v", tg.Name, err)
	}
	return maria
}
