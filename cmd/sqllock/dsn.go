package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver

	"github.com/sqllock/sqllock/dblock"
)

// connectTimeout bounds the first contact with the database, so a wrong
// host fails fast instead of hanging a crontab.
const connectTimeout = 10 * time.Second

// database is a parsed --dsn.
type database struct {
	dialect dblock.Dialect
	addr    string // where the server is, for messages (no password)
	open    func() *sql.DB
}

// parseDSN reads a postgres:// or mysql:// URL, a DSN of go-sql-driver/mysql
// (user:password@tcp(host:3306)/dbname), or an sqlite: file. Its errors
// never repeat the password.
func parseDSN(raw string) (database, error) {
	if rest, ok := cutPrefixFold(raw, "sqlite:"); ok {
		return sqliteDatabase(rest)
	}
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok || !isScheme(scheme) {
		// Not a URL: the form Go programs give sql.Open("mysql", ...).
		return mysqlDriverDSN(raw)
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		cfg, err := pgconn.ParseConfig(raw)
		if err != nil {
			// pgconn masks the password in its errors.
			return database{}, usagef("", "invalid PostgreSQL DSN: %v", err)
		}
		addr := net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))
		if strings.HasPrefix(cfg.Host, "/") {
			addr = cfg.Host
		}
		return database{
			dialect: dblock.Postgres,
			addr:    addr,
			open: func() *sql.DB {
				// The "pgx" driver fails only on a DSN ParseConfig rejected.
				db, err := sql.Open("pgx", raw)
				if err != nil {
					panic(err)
				}
				return db
			},
		}, nil
	case "mysql", "mariadb":
		cfg, err := mysqlConfig(raw)
		if err != nil {
			return database{}, usagef("", "invalid MySQL DSN: %v", err)
		}
		return mysqlDatabase(cfg), nil
	}
	return database{}, usagef("", "unsupported DSN scheme %q: use postgres://, mysql://, a go-sql-driver/mysql DSN or sqlite:FILE", scheme)
}

// isScheme reports whether s can be a URL's scheme (RFC 3986): a letter,
// then letters, digits, '+', '-' or '.'. A go-sql-driver/mysql DSN whose
// parameters hold a URL has "://" too, after characters no scheme has.
func isScheme(s string) bool {
	for i, r := range s {
		letter := 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
		if !letter && (i == 0 || !('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return false
		}
	}
	return s != ""
}

// mysqlDriverDSN reads a DSN in go-sql-driver/mysql's own form,
// [user[:password]@][net[(addr)]]/dbname[?params], the one sql.Open("mysql")
// takes, so that a program and the CLI can share one setting.
func mysqlDriverDSN(raw string) (database, error) {
	cfg, err := mysql.ParseDSN(raw)
	switch {
	case err != nil && strings.ContainsAny(raw, "@("):
		// The driver's errors name the part that is wrong, not the DSN.
		return database{}, usagef("", "invalid MySQL DSN: %v", err)
	case err != nil:
		return database{}, usagef("", "the DSN is neither a URL (postgres://..., mysql://...), "+
			"nor a go-sql-driver/mysql DSN (user:password@tcp(host:3306)/dbname), nor sqlite:FILE: %v", err)
	}
	if cfg.DBName == "" {
		return database{}, usagef("", "invalid MySQL DSN: no database name (user:password@tcp(host:3306)/dbname)")
	}
	return mysqlDatabase(cfg), nil
}

// mysqlDatabase is the database of a parsed MySQL DSN.
func mysqlDatabase(cfg *mysql.Config) database {
	return database{
		dialect: dblock.MySQL,
		addr:    cfg.Addr,
		open: func() *sql.DB {
			// NewConnector fails only on a config ParseDSN rejected.
			conn, err := mysql.NewConnector(cfg)
			if err != nil {
				panic(err)
			}
			return sql.OpenDB(conn)
		},
	}
}

// mysqlConfig turns mysql://user:password@host:port/dbname?params into a
// go-sql-driver/mysql config. The params are the driver's (tls, timeout,
// charset, ...), plus socket=/path for a Unix socket.
//
// The driver's own parser reads the params together with the real network
// and address, because it derives settings from the address once, while
// parsing: with tls=true, the host name the server's certificate must be
// issued for. User, password and database name are set afterwards, as
// they are, so that no character in them needs escaping for the driver's
// DSN syntax.
func mysqlConfig(raw string) (*mysql.Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url errors quote the whole URL, password included.
		if urlErr, ok := errors.AsType[*url.Error](err); ok {
			return nil, urlErr.Err
		}
		return nil, errors.New("not a URL")
	}
	dbName := strings.TrimPrefix(u.Path, "/")
	if dbName == "" {
		return nil, fmt.Errorf("no database name (mysql://user:password@host:3306/dbname)")
	}
	query := u.Query()
	network, addr := "unix", query.Get("socket")
	query.Del("socket")
	if addr == "" {
		host, port := u.Hostname(), u.Port()
		if host == "" {
			host = "127.0.0.1"
		}
		if port == "" {
			port = "3306"
		}
		network, addr = "tcp", net.JoinHostPort(host, port)
	}
	// The address sits between parentheses and before the last '/';
	// Encode escapes every '/' and ')' in the params.
	if strings.ContainsAny(addr, "()") {
		return nil, fmt.Errorf("the server address %q contains a parenthesis", addr)
	}
	cfg, err := mysql.ParseDSN(network + "(" + addr + ")/?" + query.Encode())
	if err != nil {
		return nil, err
	}
	cfg.DBName = dbName
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	return cfg, nil
}

// connect opens the database named by --dsn or $SQLLOCK_DSN and checks that
// it answers.
func (inv *invocation) connect(ctx context.Context) (*sql.DB, dblock.Dialect, error) {
	raw := inv.dsn
	if raw == "" {
		raw = env("SQLLOCK_DSN")
	}
	if raw == "" {
		return nil, "", usagef(inv.cmd.name, "no database given: pass --dsn or set SQLLOCK_DSN, "+
			"for example postgres://user:password@host:5432/dbname, mysql://user:password@host:3306/dbname "+
			"(or user:password@tcp(host:3306)/dbname), or sqlite:/path/to/locks.db for the processes of this host only")
	}
	d, err := parseDSN(raw)
	if err != nil {
		return nil, "", err
	}
	if err := d.checkSQLiteFile(inv.cmd.name); err != nil {
		return nil, "", err
	}
	db := d.open()
	pingCtx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		_ = db.Close()
		return nil, "", &connectError{dialect: d.dialect, addr: d.addr, err: err}
	}
	return db, d.dialect, nil
}

// connectError is a database that did not let sqllock in.
type connectError struct {
	dialect dblock.Dialect
	addr    string
	err     error
}

func (e *connectError) Error() string {
	if e.dialect == dblock.SQLite {
		return fmt.Sprintf("cannot open the SQLite file %s: %v\n(check the path in --dsn or SQLLOCK_DSN: "+
			"its directory must exist, and sqllock must be allowed to read and write both)", e.addr, e.err)
	}
	return fmt.Sprintf("cannot connect to %s at %s: %s\n(check --dsn or SQLLOCK_DSN, and that the server is running)",
		e.dialect, e.addr, connectFailure(e.err))
}

func (e *connectError) Unwrap() error { return e.err }

// connectFailure describes why a connection failed, each reason once. pgx
// tries every address of the host and, with sslmode=prefer (the default),
// each of them with TLS and then without, and its error lists every
// attempt: the same line twice for a server that is down or refuses the
// user.
func connectFailure(err error) string {
	connErr, ok := errors.AsType[*pgconn.ConnectError](err)
	if !ok {
		return err.Error()
	}
	attempts := []error{errors.Unwrap(connErr)}
	// The attempts are joined, possibly under a wrapper ("hostname
	// resolving error: ...").
	for e := attempts[0]; e != nil; e = errors.Unwrap(e) {
		if joined, ok := e.(interface{ Unwrap() []error }); ok {
			attempts = joined.Unwrap()
			break
		}
	}
	var lines []string
	for _, a := range attempts {
		if a != nil && !slices.Contains(lines, a.Error()) {
			lines = append(lines, a.Error())
		}
	}
	who := fmt.Sprintf("user %s, database %s: ", connErr.Config.User, connErr.Config.Database)
	if len(lines) == 1 {
		return who + lines[0]
	}
	return who + "\n\t" + strings.Join(lines, "\n\t")
}
