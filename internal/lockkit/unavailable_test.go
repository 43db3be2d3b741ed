package lockkit_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lib/pq"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestClassifyUnavailable covers the codes and errors a real server cannot
// be made to produce on demand (a crash, a full connection table, a proxy
// forwarding a client code): each value is what the driver returns for it.
// Errors of the same families that must not count as unavailable are
// listed too: a cancellation is the caller's, a statement timeout or a
// dropped database is not the server going away.
func TestClassifyUnavailable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"pgx connection failure 08006", &pgconn.PgError{Code: "08006"}, true},
		{"pgx connection does not exist 08003", &pgconn.PgError{Code: "08003"}, true},
		{"pgx client unable to connect 08001", &pgconn.PgError{Code: "08001"}, true},
		{"PgBouncer protocol violation 08P01", &pgconn.PgError{Code: "08P01", Message: "no more connections allowed (max_client_conn)"}, true},
		{"pgx admin shutdown 57P01", &pgconn.PgError{Code: "57P01"}, true},
		{"pgx crash shutdown 57P02", &pgconn.PgError{Code: "57P02"}, true},
		{"pgx starting up 57P03", &pgconn.PgError{Code: "57P03"}, true},
		{"pgx idle session timeout 57P05", &pgconn.PgError{Code: "57P05"}, true},
		{"pgx idle in transaction timeout 25P03", &pgconn.PgError{Code: "25P03"}, true},
		{"pgx too many connections 53300", &pgconn.PgError{Code: "53300"}, true},
		{"lib/pq admin shutdown 57P01", &pq.Error{Code: "57P01"}, true},
		{"lib/pq connection failure 08006", fmt.Errorf("wrapped: %w", &pq.Error{Code: "08006"}), true},
		{"pgx statement timeout 57014", &pgconn.PgError{Code: "57014"}, false},
		{"pgx database dropped 57P04", &pgconn.PgError{Code: "57P04"}, false},
		{"pgx bad password 28P01", &pgconn.PgError{Code: "28P01"}, false},
		{"pgx unknown database 3D000", &pgconn.PgError{Code: "3D000"}, false},
		{"pgx conn closed", fmt.Errorf("acquire: %w", pgconn.ErrConnClosed), true},

		{"MySQL too many connections 1040", &mysql.MySQLError{Number: 1040}, true},
		{"MySQL shutdown in progress 1053", &mysql.MySQLError{Number: 1053}, true},
		{"MySQL normal shutdown 1077", &mysql.MySQLError{Number: 1077}, true},
		{"MySQL forcing close 1080", &mysql.MySQLError{Number: 1080}, true},
		{"MySQL host blocked 1129", &mysql.MySQLError{Number: 1129}, true},
		{"MySQL aborting connection 1152", &mysql.MySQLError{Number: 1152}, true},
		{"MySQL net read error 1158", &mysql.MySQLError{Number: 1158}, true},
		{"MySQL net write interrupted 1161", &mysql.MySQLError{Number: 1161}, true},
		{"MySQL max_user_connections 1203", &mysql.MySQLError{Number: 1203}, true},
		{"MariaDB connection killed 1927", &mysql.MySQLError{Number: 1927}, true},
		{"MySQL idle session ended 4031", &mysql.MySQLError{Number: 4031}, true},
		{"client can't connect 2002", &mysql.MySQLError{Number: 2002}, true},
		{"client can't connect to host 2003", &mysql.MySQLError{Number: 2003}, true},
		{"client unknown host 2005", &mysql.MySQLError{Number: 2005}, true},
		{"client server gone 2006", &mysql.MySQLError{Number: 2006}, true},
		{"client lost connection 2013", &mysql.MySQLError{Number: 2013}, true},
		{"Galera node not ready 1047", &mysql.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"}, true},
		{"unknown command 1047", &mysql.MySQLError{Number: 1047, Message: "Unknown command"}, false},
		{"MySQL access denied 1045", &mysql.MySQLError{Number: 1045}, false},
		{"MySQL query interrupted 1317", &mysql.MySQLError{Number: 1317}, false},
		{"go-sql-driver invalid connection", fmt.Errorf("rowlock: %w", mysql.ErrInvalidConn), true},

		{"connection refused", refused, true},
		{"DNS failure", &net.DNSError{Err: "no such host", Name: "db.invalid", IsNotFound: true}, true},
		{"bad connection", driver.ErrBadConn, true},
		{"EOF mid-statement", fmt.Errorf("failed to receive message: %w", io.ErrUnexpectedEOF), true},
		{"EOF", io.EOF, true},
		{"caller's deadline", context.DeadlineExceeded, false},
		{"caller's cancellation", fmt.Errorf("x: %w", context.Canceled), false},
		{"caller's cancellation joined to a broken connection", errors.Join(context.Canceled, mysql.ErrInvalidConn), false},
		{"syntax error", &pgconn.PgError{Code: "42601"}, false},
		{"other", errors.New("something else"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkUnavailable(t, c.err, c.want)
		})
	}
}

// checkUnavailable checks ClassifyError and WrapDBError on err: an
// unavailable error is wrapped once with dblock.ErrUnavailable and keeps
// the driver's error in the chain; another is not wrapped with it.
func checkUnavailable(t *testing.T, err error, want bool) {
	t.Helper()
	if got := lockkit.ClassifyError(err) == lockkit.ClassUnavailable; got != want {
		t.Errorf("ClassifyError(%v) = %v, want unavailable %v", err, lockkit.ClassifyError(err), want)
	}
	wrapped := lockkit.WrapDBError("op", err)
	if errors.Is(wrapped, dblock.ErrUnavailable) != want {
		t.Errorf("WrapDBError(%v) = %v: wraps ErrUnavailable %v, want %v", err, wrapped, !want, want)
	}
	if !errors.Is(wrapped, err) {
		t.Errorf("WrapDBError(%v) = %v: lost the driver error", err, wrapped)
	}
	if !want {
		return
	}
	if !strings.HasPrefix(wrapped.Error(), "op: dblock: database unavailable: ") {
		t.Errorf("WrapDBError(%v) = %q, want the op, the sentinel, then the driver's error", err, wrapped)
	}
	// Wrapping again (an outer call) does not say it twice.
	twice := lockkit.WrapDBError("outer", wrapped)
	if n := strings.Count(twice.Error(), dblock.ErrUnavailable.Error()); n != 1 {
		t.Errorf("WrapDBError twice says %q %d times: %v", dblock.ErrUnavailable, n, twice)
	}
}

// TestDialErrorsClassified: dials that fail for the caller's reasons are
// not unavailability; one that times out on its own is.
func TestDialErrorsClassified(t *testing.T) {
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := (&net.Dialer{}).DialContext(canceled, "tcp", "127.0.0.1:1")
	if err == nil {
		t.Fatal("dial with a canceled context succeeded")
	}
	checkUnavailable(t, err, false)

	_, err = (&net.Dialer{Timeout: time.Nanosecond}).Dial("tcp", "127.0.0.1:1")
	if err == nil {
		t.Fatal("dial with a 1 ns timeout succeeded")
	}
	checkUnavailable(t, err, true)
}

// TestUnavailableServers produces unavailability with the real servers and
// drivers: a closed port, a connection cut under a transaction, a session
// the server ends (pg_terminate_backend, KILL), a server that accepts TCP
// and never answers, and an SQLite file that cannot be opened.
func TestUnavailableServers(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Run("closed port", func(t *testing.T) {
				db := testdb.Open(t, tg, tg.DSNVia(closedPort(t)))
				err := db.PingContext(t.Context())
				checkUnavailable(t, err, true)
				if _, ok := errors.AsType[*net.OpError](lockkit.WrapDBError("op", err)); !ok {
					t.Errorf("%v: the *net.OpError is not in the chain", err)
				}
			})
			t.Run("connection cut under a transaction", func(t *testing.T) {
				proxy := testdb.NewProxy(t, tg.HostPort())
				db := testdb.Open(t, tg, tg.DSNVia(proxy.Addr()))
				tx, err := db.BeginTx(t.Context(), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback() }()
				if _, err := tx.ExecContext(t.Context(), `SELECT 1`); err != nil {
					t.Fatal(err)
				}
				proxy.Cut()
				_, err = tx.ExecContext(t.Context(), `SELECT 1`)
				checkUnavailable(t, err, true)
				// The pool's next connection is refused by the cut proxy.
				checkUnavailable(t, db.PingContext(t.Context()), true)
			})
			t.Run("session ended by the server", func(t *testing.T) {
				db := testdb.Open(t, tg, tg.DSN)
				conn, err := db.Conn(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				var id int64
				idQuery, kill := `SELECT pg_backend_pid()`, `SELECT pg_terminate_backend($1)`
				if tg.Dialect == dblock.MySQL {
					idQuery, kill = `SELECT CONNECTION_ID()`, `KILL CONNECTION ?`
				}
				if err := conn.QueryRowContext(t.Context(), idQuery).Scan(&id); err != nil {
					t.Fatal(err)
				}
				if _, err := tg.DB.ExecContext(t.Context(), kill, id); err != nil {
					t.Fatal(err)
				}
				// The server may take a moment to end the session: until
				// then the statement still succeeds.
				for {
					_, err = conn.ExecContext(t.Context(), `SELECT 1`)
					if err != nil {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				checkUnavailable(t, err, true)
			})
			t.Run("server that never answers", func(t *testing.T) {
				addr := silentServer(t)
				dsn := tg.DSNVia(addr)
				if tg.Dialect == dblock.MySQL {
					// go-sql-driver returns a bare ctx.Err() when the
					// caller's deadline cuts its handshake short, which is
					// the caller's; its own read timeout is the server's.
					cfg, err := mysql.ParseDSN(dsn)
					if err != nil {
						t.Fatal(err)
					}
					cfg.ReadTimeout = 200 * time.Millisecond
					dsn = cfg.FormatDSN()
				}
				db := testdb.Open(t, tg, dsn)
				// On MySQL the read timeout must be what ends the wait, not
				// ctx (both at 200 ms raced, and ctx's bare error won about
				// one run in ten): ctx is only a bound there.
				wait := 200 * time.Millisecond
				if tg.Dialect == dblock.MySQL {
					wait = 30 * time.Second
				}
				ctx, cancel := context.WithTimeout(t.Context(), wait)
				defer cancel()
				checkUnavailable(t, db.PingContext(ctx), true)
			})
		})
	}
	t.Run(testdb.SQLiteName, func(t *testing.T) {
		if testdb.LeftOut(t, testdb.SQLiteName) {
			return
		}
		db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "no-such-dir", "x.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		err = db.PingContext(t.Context())
		checkUnavailable(t, err, true)
		if !strings.Contains(err.Error(), "unable to open database file") {
			t.Errorf("%v: want SQLite's unable to open database file", err)
		}
	})
}

// closedPort returns a 127.0.0.1 address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// silentServer listens on 127.0.0.1 and never accepts: the kernel
// completes connections, and nothing ever answers on them.
func silentServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}
