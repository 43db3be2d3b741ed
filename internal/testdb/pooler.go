package testdb

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/migrations"
)

// DefaultPgBouncerDSN is the PgBouncer that `.ci/pgbouncer start` runs:
// transaction pooling in front of the local PostgreSQL.
const DefaultPgBouncerDSN = "postgres://root@127.0.0.1:6432/test"

// pgbouncerEnv overrides DefaultPgBouncerDSN.
const pgbouncerEnv = "SQLLOCK_PGBOUNCER_DSN"

// pooler is the PgBouncer target, opened once per test binary and closed
// by closeShared.
var pooler struct {
	once   sync.Once
	target Target
	err    error
	conns  pgxConns
}

// PgBouncer returns the PostgreSQL database behind a PgBouncer in
// transaction pooling mode (SQLLOCK_PGBOUNCER_DSN, default
// DefaultPgBouncerDSN), its Name "pgbouncer". Its DB is shared by the test
// binary (tests must not close it) and has pgx's defaults, as a user's DSN
// would: named prepared statements, which PgBouncer 1.18 mixes up between
// clients. The tables are migrated once, over a direct connection to the
// server behind the pooler (the server reports its own address):
// migrations take a session lock, which needs one. It fails the test,
// never skips, when the pooler cannot be reached.
func PgBouncer(t testing.TB) Target {
	t.Helper()
	pooler.once.Do(func() { pooler.target, pooler.err = openPooler() })
	if pooler.err != nil {
		t.Fatalf("testdb: %v", pooler.err)
	}
	return pooler.target
}

func openPooler() (Target, error) {
	dsn, fromEnv := os.LookupEnv(pgbouncerEnv)
	if !fromEnv || dsn == "" {
		dsn = DefaultPgBouncerDSN
	}
	tg := Target{Name: "pgbouncer", Dialect: dblock.Postgres, DriverName: "pgx", DSN: dsn}
	if _, err := tg.hostPort(); err != nil {
		return Target{}, fmt.Errorf("%s=%q: %v", pgbouncerEnv, dsn, err)
	}
	db, err := connect("pgx", dsn, &pooler.conns)
	if err != nil {
		return Target{}, fmt.Errorf("PgBouncer unreachable at %s: %v\n\tto fix: run `.ci/pgbouncer start` "+
			"(transaction pooling on 127.0.0.1:6432 in front of the local PostgreSQL), or set %s to a reachable one",
			tg.HostPort(), err, pgbouncerEnv)
	}
	db.SetMaxOpenConns(sharedMaxConns)
	db.SetMaxIdleConns(sharedMaxConns)
	tg.DB = db
	if err := migrateBehind(tg); err != nil {
		_ = db.Close()
		return Target{}, err
	}
	return tg, nil
}

// migrateBehind runs migrations.Up on the database behind the pooler tg,
// through a direct connection to the address the server reports.
func migrateBehind(tg Target) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var host string
	var port int
	// Simple protocol: the harness's own statements must not depend on
	// what is under test.
	err := tg.DB.QueryRowContext(ctx, `SELECT host(inet_server_addr()), inet_server_port()`,
		pgx.QueryExecModeSimpleProtocol).Scan(&host, &port)
	if err != nil {
		return fmt.Errorf("pgbouncer: the address of the server behind %s: %v", tg.HostPort(), err)
	}
	u, err := url.Parse(tg.DSN)
	if err != nil || !strings.HasPrefix(u.Scheme, "postgres") {
		return fmt.Errorf("%s=%q is not a postgres:// URL", pgbouncerEnv, tg.DSN)
	}
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	var conns pgxConns
	direct, err := connect("pgx", u.String(), &conns)
	if err != nil {
		return fmt.Errorf("pgbouncer: the server behind it, %s, is not reachable directly: %v", u.Host, err)
	}
	err = migrations.Up(ctx, direct)
	_ = direct.Close()
	if werr := conns.wait(); err == nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("pgbouncer: migrations.Up on the server behind it (%s): %v", u.Host, err)
	}
	return nil
}
