package rowlock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener holds one connection in LISTEN on releaseChannel for a Locker
// and wakes the Locker's first waiter of each released name. It runs while
// the Locker has waiters, and for an idle period after, so a stream of
// handoffs does not pay for a new LISTEN each time.
type listener struct {
	db      *sql.DB
	idle    time.Duration
	waiters *waitlist // of the Locker; its first waiter of a released name is woken
	logger  *slog.Logger

	mu        sync.Mutex
	running   bool
	ready     chan struct{} // closed once LISTEN is in effect
	failed    chan struct{} // closed if the listener stopped
	cancel    context.CancelFunc
	done      chan struct{}
	idleTimer *time.Timer
	closed    bool
	warned    bool // about a pool too small to listen on
}

// errNoPgx means the driver is not pgx: waiters poll instead.
var errNoPgx = errors.New("rowlock: LISTEN needs the pgx driver")

// ensure starts the listener if needed and waits until it listens. It
// reports false if it cannot listen; waiters then poll.
func (ln *listener) ensure(ctx context.Context) bool {
	ln.mu.Lock()
	if ln.closed {
		ln.mu.Unlock()
		return false
	}
	if !ln.running && !reserveListenConn(ln.db) {
		if !ln.warned {
			ln.warned = true
			ln.logger.Warn("rowlock: the pool cannot spare a connection to LISTEN on; waiters poll",
				"max_open_conns", ln.db.Stats().MaxOpenConnections)
		}
		ln.mu.Unlock()
		return false
	}
	if !ln.running {
		runCtx, cancel := context.WithCancel(context.Background())
		ln.running = true
		ln.ready = make(chan struct{})
		ln.failed = make(chan struct{})
		ln.cancel = cancel
		ln.done = make(chan struct{})
		go ln.run(runCtx, ln.ready, ln.failed, ln.done)
	}
	ready, failed := ln.ready, ln.failed
	ln.mu.Unlock()
	select {
	case <-ready:
		return true
	case <-failed:
		return false
	case <-ctx.Done():
		return false
	}
}

// busy stops the idle countdown: a waiter arrived.
func (ln *listener) busy() {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.idleTimer != nil {
		ln.idleTimer.Stop()
		ln.idleTimer = nil
	}
}

// idleNow starts the countdown after which an unused listener stops.
func (ln *listener) idleNow() {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if !ln.running || ln.idleTimer != nil {
		return
	}
	cancel := ln.cancel
	ln.idleTimer = time.AfterFunc(ln.idle, cancel)
}

// close stops the listener and waits for its goroutine.
func (ln *listener) close() {
	ln.mu.Lock()
	ln.closed = true
	if ln.idleTimer != nil {
		ln.idleTimer.Stop()
	}
	cancel, done, running := ln.cancel, ln.done, ln.running
	ln.mu.Unlock()
	if running {
		cancel()
		<-done
	}
}

func (ln *listener) run(ctx context.Context, ready, failed, done chan struct{}) {
	defer close(done)
	err := ln.listen(ctx, ready)
	releaseListenConn(ln.db)
	ln.mu.Lock()
	ln.running = false
	if errors.Is(err, errNoPgx) {
		ln.closed = true // not pgx: never try again, waiters poll
	}
	if ln.idleTimer != nil {
		ln.idleTimer.Stop()
		ln.idleTimer = nil
	}
	ln.mu.Unlock()
	close(failed)
	if err != nil && ctx.Err() == nil {
		ln.logger.Warn("rowlock: listener stopped; waiters poll until it restarts", "error", err)
	}
}

func (ln *listener) listen(ctx context.Context, ready chan struct{}) error {
	conn, err := ln.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		pc, ok := dc.(interface{ Conn() *pgx.Conn })
		if !ok {
			return errNoPgx
		}
		c := pc.Conn()
		if _, err := c.Exec(ctx, "LISTEN "+releaseChannel); err != nil {
			return errors.Join(err, driver.ErrBadConn)
		}
		close(ready)
		for {
			n, err := c.WaitForNotification(ctx)
			if err != nil {
				// The connection is still LISTENing (or broken): never hand
				// it back to the pool.
				return errors.Join(err, driver.ErrBadConn)
			}
			ln.waiters.wakeFirst(n.Payload)
		}
	})
}

// listenConns counts, per pool, the connections this process's listeners
// hold. A listener keeps its connection checked out for as long as it runs,
// so in a pool with a limit it must leave at least one connection for
// everything else (tries, renewals, releases), or waiters would wait for a
// connection that only a release could free, and the release for one too.
var listenConns = struct {
	sync.Mutex
	n map[*sql.DB]int
}{n: make(map[*sql.DB]int)}

// reserveListenConn counts a listening connection on db if the pool can
// spare it: no limit (db.SetMaxOpenConns(0), the default) or at least one
// connection left besides the listeners.
func reserveListenConn(db *sql.DB) bool {
	listenConns.Lock()
	defer listenConns.Unlock()
	if limit := db.Stats().MaxOpenConnections; limit > 0 && limit-listenConns.n[db] < 2 {
		return false
	}
	listenConns.n[db]++
	return true
}

func releaseListenConn(db *sql.DB) {
	listenConns.Lock()
	defer listenConns.Unlock()
	if listenConns.n[db]--; listenConns.n[db] <= 0 {
		delete(listenConns.n, db)
	}
}
