package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// testDatabaseTrouble runs sqllock against databases it cannot use, each
// way it can fail: every command exits with the code the help promises,
// says why exactly once, and run never starts its command. dsn is a
// migrated schema of tg's server as an sqllock URL.
func testDatabaseTrouble(t *testing.T, cli *sqllockCLI, tg testdb.Target, dsn string) {
	shared := tg
	with := func(change func(u *url.URL)) string {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		change(u)
		return u.String()
	}
	down := with(func(u *url.URL) { u.Host = "127.0.0.1:1" })
	noDatabase := with(func(u *url.URL) { u.Path = "/sqllock_no_such_database" })
	noUser := with(func(u *url.URL) { u.User = url.User("sqllock_no_such_user") })
	_, empty := isolated(t, shared)
	readOnlyParam, on := "default_transaction_read_only", "on"
	if tg.Dialect == dblock.MySQL {
		readOnlyParam, on = "transaction_read_only", "1"
		if testdb.IsMariaDB(t, tg) {
			readOnlyParam = "tx_read_only"
		}
	}
	readOnly := with(func(u *url.URL) {
		q := u.Query()
		q.Set(readOnlyParam, on)
		u.RawQuery = q.Encode()
	})

	// What each server says, which sqllock must say once.
	refused, unknownDB, unknownUser, readOnlyMsg := "connection refused", `database "sqllock_no_such_database" does not exist`,
		`role "sqllock_no_such_user" does not exist`, dblock.ErrReadOnly.Error()
	if tg.Dialect == dblock.MySQL {
		unknownDB, unknownUser = "Unknown database 'sqllock_no_such_database'", "Access denied for user 'sqllock_no_such_user'"
	}
	const noTables = "run 'sqllock migrate up' first"

	for _, c := range []struct {
		name string
		dsn  string
		args []string // run's get "--name NAME -- touch MARKER" appended
		code int
		once string // stderr says this exactly once
	}{
		{"unreachable: status", down, []string{"status"}, exitUnavailable, refused},
		{"unreachable: migrate up", down, []string{"migrate", "up"}, exitUnavailable, refused},
		{"unreachable: reap", down, []string{"reap"}, exitUnavailable, refused},
		{"unreachable: run", down, []string{"run"}, exitUnavailable, refused},
		{"unknown database: status", noDatabase, []string{"status"}, exitConfig, unknownDB},
		{"unknown database: run", noDatabase, []string{"run"}, exitConfig, unknownDB},
		{"unknown user: migrate version", noUser, []string{"migrate", "version"}, exitConfig, unknownUser},
		{"unknown user: run", noUser, []string{"run"}, exitConfig, unknownUser},
		{"no lock tables: status", empty, []string{"status"}, exitConfig, noTables},
		{"no lock tables: reap", empty, []string{"reap"}, exitConfig, noTables},
		{"no lock tables: run", empty, []string{"run", "-v"}, exitConfig, noTables},
		{"read-only: run", readOnly, []string{"run"}, exitUnavailable, readOnlyMsg},
		{"read-only: migrate up", readOnly, []string{"migrate", "up"}, exitUnavailable, readOnlyMsg},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			marker := filepath.Join(t.TempDir(), "ran")
			if args[0] == "run" {
				args = append(append([]string{}, args...), "--name", testdb.Name(t), "--", "touch", marker)
			}
			code, stdout, stderr := cli.run(append([]string{"--dsn", c.dsn}, args...)...)
			if code != c.code {
				t.Errorf("sqllock %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, c.code, stdout, stderr)
			}
			if n := strings.Count(stderr, c.once); n != 1 {
				t.Errorf("stderr says %q %d times, want once:\n%s", c.once, n, stderr)
			}
			if strings.Contains(stderr, "migrations.Up") {
				t.Errorf("stderr speaks Go to a shell user:\n%s", stderr)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the command ran (%v)", err)
			}
		})
	}
}

// testQuietSkip checks that a replica losing the race exits 75 and prints
// nothing (cron would mail it), and says who holds the lock with -v.
func testQuietSkip(t *testing.T, cli *sqllockCLI, tg testdb.Target) {
	name := testdb.Name(t)
	insertHeld(t, tg, name)
	for _, c := range []struct {
		args   []string
		stderr string // "": none at all
	}{
		{[]string{"run", "--name", name, "--", "true"}, ""},
		{[]string{"run", "--name", name, "--wait", "100ms", "--", "true"}, ""},
		{[]string{"run", "-v", "--name", name, "--", "true"}, "sqllock: lock " + name + " is held by another process (by cli-test for "},
		{[]string{"run", "--name", name, "-v", "--wait", "100ms", "--", "true"}, "; waited 100ms"},
	} {
		t.Run(strings.Join(c.args[:len(c.args)-3], " "), func(t *testing.T) {
			code, stdout, stderr := cli.run(c.args...)
			if code != exitTempFail || stdout != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing", code, stdout, exitTempFail)
			}
			if c.stderr == "" && stderr != "" || !strings.Contains(stderr, c.stderr) {
				t.Errorf("stderr %q, want %q", stderr, c.stderr)
			}
		})
	}
}

func testVersion(t *testing.T, cli *sqllockCLI) {
	code, stdout, stderr := cli.run("--version")
	if code != exitOK || !strings.HasPrefix(stdout, "sqllock ") || !strings.Contains(stdout, runtime.Version()) || stderr != "" {
		t.Errorf("--version: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

// TestDatabaseExit sorts errors a real server cannot be made to produce on
// demand: exit 69 follows the library's dblock.ErrUnavailable
// classification (lockkit.ClassifyError), and the CLI adds only its own
// connect timeout; the caller-side errors and refusals keep their codes.
func TestDatabaseExit(t *testing.T) {
	pgConnect := func(err error) error { return &connectError{dialect: dblock.Postgres, addr: "db:5432", err: err} }
	myConnect := func(err error) error { return &connectError{dialect: dblock.MySQL, addr: "db:3306", err: err} }
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		{"PostgreSQL starting up", pgConnect(&pgconn.PgError{Code: "57P03"}), exitUnavailable},
		{"PostgreSQL too many connections", pgConnect(&pgconn.PgError{Code: "53300"}), exitUnavailable},
		{"PostgreSQL admin shutdown mid-run", fmt.Errorf("rowlock: acquire: %w", &pgconn.PgError{Code: "57P01"}), exitUnavailable},
		{"MySQL too many connections", myConnect(&mysql.MySQLError{Number: 1040}), exitUnavailable},
		{"MySQL shutdown in progress", myConnect(&mysql.MySQLError{Number: 1053}), exitUnavailable},
		{"MySQL connection lost mid-run", fmt.Errorf("rowlock: renew: %w", mysql.ErrInvalidConn), exitUnavailable},
		{"the library's ErrUnavailable", fmt.Errorf("x: %w: %w", dblock.ErrUnavailable, io.ErrUnexpectedEOF), exitUnavailable},
		{"a handshake that never came within connectTimeout", myConnect(context.DeadlineExceeded), exitUnavailable},
		{"read-only", fmt.Errorf("x: %w", dblock.ErrReadOnly), exitUnavailable},
		{"bad password", pgConnect(&pgconn.PgError{Code: "28P01"}), exitConfig},
		{"MySQL access denied", myConnect(&mysql.MySQLError{Number: 1045}), exitConfig},
		{"a deadline that is not the connect's", context.DeadlineExceeded, 0},
		{"a cancellation", myConnect(context.Canceled), 0},
		{"a syntax error", &pgconn.PgError{Code: "42601"}, 0},
	} {
		if got := databaseExit(c.err); got != c.want {
			t.Errorf("%s: databaseExit(%v) = %d, want %d", c.name, c.err, got, c.want)
		}
	}
}

// TestSilentServer: a server that accepts connections and never answers
// makes every dialect exit 69 once the DSN's own connect timeout runs out.
func TestSilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // never accepted: the kernel completes connections, nothing answers
	for _, dsn := range []string{
		"postgres://u@" + ln.Addr().String() + "/x?connect_timeout=1",
		"mysql://u@" + ln.Addr().String() + "/x?readTimeout=500ms",
	} {
		t.Run(dsn, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := Main([]string{"--dsn", dsn, "status"}, &stdout, &stderr); code != exitUnavailable {
				t.Errorf("exit %d, want %d\nstderr: %s", code, exitUnavailable, stderr.String())
			}
			if !strings.Contains(stderr.String(), "cannot connect") {
				t.Errorf("stderr does not say it cannot connect: %s", stderr.String())
			}
		})
	}
}
