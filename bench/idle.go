package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/queue"
	"github.com/sqllock/sqllock/rowlock"
)

func idle(ctx context.Context, cfg config, e *env, t *table) error {
	// A pool of its own, small (a hundred waiters trying at once must not
	// open a hundred connections: PostgreSQL's default limit), whose
	// statements are counted in the client: the server's counters add up
	// every client's, and other programs use these servers too.
	sent := new(atomic.Int64)
	db, err := countingPool(e, sent)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := fillPool(ctx, db, poolSize); err != nil {
		return err
	}
	for _, n := range cfg.idleCounts {
		qps, err := idleWaiters(ctx, e, db, sent, n, cfg.idleWindow)
		if err != nil {
			return err
		}
		t.add(e.target.name, fmt.Sprint(n), fmt.Sprintf("%.1f", qps))
	}
	return nil
}

// idleWaiters queues n fair waiters behind a holder and counts the
// statements the server runs per second while they wait.
func idleWaiters(ctx context.Context, e *env, db *sql.DB, sent *atomic.Int64, n int, window time.Duration) (float64, error) {
	l, err := rowlock.New(db)
	if err != nil {
		return 0, err
	}
	defer l.Close()
	q, err := queue.New(db)
	if err != nil {
		return 0, err
	}
	name := e.newName("idle", n)
	holder, err := l.Acquire(ctx, name, dblock.TTL(time.Minute))
	if err != nil {
		return 0, err
	}
	defer holder.Release(ctx)
	waitCtx, cancel := context.WithCancel(ctx)
	failed := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			k, err := l.Acquire(waitCtx, name, dblock.Fair())
			if err == nil {
				err = errors.Join(errors.New("a waiter acquired a held lock"), k.Release(ctx))
			}
			if waitCtx.Err() == nil {
				failed <- err
			}
		})
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		ws, err := q.Waiters(ctx, name)
		if err != nil {
			return 0, err
		}
		if len(ws) == n {
			break
		}
		select {
		case err := <-failed:
			return 0, fmt.Errorf("idle waiter: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d of %d waiters queued after a minute", len(ws), n)
		}
	}
	time.Sleep(time.Second) // let the first tries settle
	before := sent.Load()
	time.Sleep(window)
	after := sent.Load()
	select {
	case err := <-failed:
		return 0, fmt.Errorf("idle waiter: %w", err)
	default:
	}
	return float64(after-before) / window.Seconds(), nil
}

// countingPool opens a pool on e's database that adds every statement it
// sends to sent: through pgx's query tracer on PostgreSQL (which keeps
// LISTEN working: the driver is pgx's own), and on MySQL by reading the
// command byte of each packet the driver writes.
func countingPool(e *env, sent *atomic.Int64) (*sql.DB, error) {
	if e.dialect == dblock.Postgres {
		cfg, err := pgx.ParseConfig(e.dsn)
		if err != nil {
			return nil, err
		}
		cfg.Tracer = pgCounter{sent}
		return stdlib.OpenDB(*cfg), nil
	}
	cfg, err := mysql.ParseDSN(e.dsn)
	if err != nil {
		return nil, err
	}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return myCounter{c, sent}, nil
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(connector), nil
}

// fillPool caps db at size connections and opens them all now.
func fillPool(ctx context.Context, db *sql.DB, size int) error {
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(size)
	conns, closeConns, err := pinned(ctx, db, size)
	if err != nil {
		return err
	}
	defer closeConns()
	for _, c := range conns {
		if err := c.PingContext(ctx); err != nil {
			return err
		}
	}
	return nil
}

type pgCounter struct{ sent *atomic.Int64 }

func (c pgCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.sent.Add(1)
	return ctx
}

func (pgCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// myCounter counts the statements a go-sql-driver/mysql connection sends.
// The driver writes each packet with one Write: a 3-byte length, the
// sequence number (0 starts a command) and, for a command, its type.
type myCounter struct {
	net.Conn
	sent *atomic.Int64
}

const (
	comQuery       = 0x03
	comStmtExecute = 0x17
)

func (c myCounter) Write(p []byte) (int, error) {
	if len(p) > 4 && p[3] == 0 && (p[4] == comQuery || p[4] == comStmtExecute) {
		c.sent.Add(1)
	}
	return c.Conn.Write(p)
}
