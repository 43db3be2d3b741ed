package testdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync/atomic"
	"testing"

	"github.com/sqllock/sqllock/dblock"
)

// ReadOnlySwitch is a pool on a Target's database whose connections can be
// made read-only, as after a failover to a standby: PostgreSQL sessions
// with default_transaction_read_only (SQLSTATE 25006, as a hot standby
// answers), MariaDB's tx_read_only and MySQL's transaction_read_only
// (error 1792). The pool keeps no idle connection, so every statement after
// Set runs on a connection opened with the new mode.
type ReadOnlySwitch struct {
	DB       *sql.DB
	readOnly atomic.Bool
}

// NewReadOnlySwitch opens a ReadOnlySwitch on tg, writable at first and
// closed when the test ends.
func NewReadOnlySwitch(t testing.TB, tg Target) *ReadOnlySwitch {
	t.Helper()
	param, on := "default_transaction_read_only", "on"
	if tg.Dialect == dblock.MySQL {
		param, on = "transaction_read_only", "1"
		if IsMariaDB(t, tg) {
			param = "tx_read_only"
		}
	}
	dc, ok := tg.DB.Driver().(driver.DriverContext)
	if !ok {
		t.Fatalf("testdb: the %s driver has no OpenConnector", tg.Name)
	}
	rw, err := dc.OpenConnector(tg.DSN)
	if err != nil {
		t.Fatalf("testdb: %s connector: %v", tg.Name, err)
	}
	ro, err := dc.OpenConnector(dsnFor(t, tg, "", map[string]string{param: on}))
	if err != nil {
		t.Fatalf("testdb: %s read-only connector: %v", tg.Name, err)
	}
	s := &ReadOnlySwitch{}
	s.DB = sql.OpenDB(switchConnector{rw: rw, ro: ro, s: s})
	s.DB.SetMaxIdleConns(0)
	t.Cleanup(func() { _ = s.DB.Close() })
	return s
}

// Set makes the connections opened from now on read-only, or writable.
func (s *ReadOnlySwitch) Set(readOnly bool) { s.readOnly.Store(readOnly) }

type switchConnector struct {
	rw, ro driver.Connector
	s      *ReadOnlySwitch
}

func (c switchConnector) Connect(ctx context.Context) (driver.Conn, error) {
	if c.s.readOnly.Load() {
		return c.ro.Connect(ctx)
	}
	return c.rw.Connect(ctx)
}

// Driver is the real driver's, so that dialect detection sees pgx or
// go-sql-driver/mysql.
func (c switchConnector) Driver() driver.Driver { return c.rw.Driver() }
