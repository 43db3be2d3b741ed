package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// closeWait bounds how long closing a pool waits for its connections. pgx
// gives an asynchronous close 15 s (the deadline in asyncClose), so only a
// connection the test never gave back takes longer.
const closeWait = 20 * time.Second

// pgxConns are the connections made by the harness's pools on pgx, so that
// closing a pool can wait until each has really closed. database/sql
// cannot. When a query's context ends mid-flight, pgx returns at once and
// closes the connection in a goroutine of its own (pgconn's asyncClose: a
// CancelRequest on a second connection, then Terminate, then reading until
// the server hangs up). The driver's Close of a connection so closed
// returns at once. Tests cancel queries on purpose (a Leader stopped while
// it campaigns, a Release that cuts a renewal short), and without this wait
// the last of those goroutines could still be running when the leak check
// looks: on a loaded machine, a flake. CleanupDone is pgx's signal that
// the goroutine has finished.
type pgxConns struct {
	mu    sync.Mutex
	conns []*pgconn.PgConn
}

// add is the pool's stdlib.OptionAfterConnect.
func (p *pgxConns) add(_ context.Context, c *pgx.Conn) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Forget the ones done, so that a pool used for a whole test binary
	// keeps a short list.
	p.conns = slices.DeleteFunc(p.conns, closed)
	p.conns = append(p.conns, c.PgConn())
	return nil
}

func closed(c *pgconn.PgConn) bool {
	select {
	case <-c.CleanupDone():
		return true
	default:
		return false
	}
}

// wait waits, up to closeWait, until every connection has closed. Call it
// after closing the pools the connections came from.
func (p *pgxConns) wait() error {
	p.mu.Lock()
	conns := slices.Clone(p.conns)
	p.mu.Unlock()
	timeout := time.NewTimer(closeWait)
	defer timeout.Stop()
	for i, c := range conns {
		select {
		case <-c.CleanupDone():
		case <-timeout.C:
			return fmt.Errorf("testdb: %d pgx connections still open %v after their pool was closed: a test did not give them back",
				len(slices.DeleteFunc(conns[i:], closed)), closeWait)
		}
	}
	return nil
}

// openDB is sql.Open, except that a pgx pool records its connections in
// conns.
func openDB(driver, dsn string, conns *pgxConns) (*sql.DB, error) {
	if driver != "pgx" {
		return sql.Open(driver, dsn)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	return stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(conns.add)), nil
}
