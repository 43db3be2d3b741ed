package forupdate

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/clock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/metrics"
)

// hold is a lock held in the database: a transaction holding the row lock,
// on a connection taken out of the pool for it. Its handles (*Lock) are
// the reentrant holds of its owner; the last one to go ends it.
type hold struct {
	l     *Locker
	key   holdKey
	name  string // as the caller gave it (key.name is derived from it)
	share bool   // a read lock's hold: the row locked FOR SHARE
	limit int    // a permit's: the semaphore's limit
	slot  int    // a permit's: its slot
	token int64
	// ttl is the hold's belief (Locker.belief): its pings' pace and
	// how long it trusts its lock without one.
	ttl      time.Duration
	conn     *sql.Conn
	tx       *sql.Tx
	txCancel context.CancelFunc

	acquired time.Time // for the hold-time metric
	// metrics records the hold's measurements, as the lock type of the
	// acquisition that took it (a writer's read re-enters a write hold).
	metrics *metrics.Instruments

	mu           sync.Mutex
	handles      map[*Lock]struct{}
	lost         error     // set once, wrapping dblock.ErrLockLost
	closing      bool      // the last handle is ending the transaction
	rollbackOnly bool      // an inner hold called Rollback
	lastAlive    time.Time // when the last successful ping was sent

	pingMu sync.Mutex // one ping at a time

	// The ping loop is a chain of timers, not a goroutine: a lock held for
	// less than TTL/3 costs no goroutine. tickMu is held while a tick runs,
	// so that stopPinging can wait for it.
	tickMu  sync.Mutex
	timer   *time.Timer
	stopped bool // under mu: no tick may start or reschedule
}

// newHold is the hold of key, for req, that the attempt c won with token
// (on slot, a permit's); txCancel ends c.tx's context. It starts the
// hold's pings; stopPinging stops them.
func newHold(l *Locker, key holdKey, req request, slot int, c lockCall, token int64, txCancel context.CancelFunc) *hold {
	h := &hold{
		l: l, key: key, name: req.name, share: c.share, limit: req.limit, slot: slot,
		token: token, ttl: l.belief(c.ttl), conn: c.conn, tx: c.tx, txCancel: txCancel,
		handles:   make(map[*Lock]struct{}),
		lastAlive: clock.Now(),
		acquired:  clock.Now(),
		metrics:   l.metrics.As(req.lockType()),
	}
	h.mu.Lock()
	h.timer = time.AfterFunc(h.pingInterval(), h.tick)
	h.mu.Unlock()
	return h
}

// enter adds a handle for an acquisition with ctx, or returns nil when the
// hold is lost or ending. Called with l.mu held.
func (h *hold) enter(ctx context.Context) *Lock {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lost != nil || h.closing {
		return nil
	}
	// The lock outlives Acquire's context but keeps its values, and
	// carries the owner so that acquiring with it re-enters.
	base := dblock.WithOwner(context.WithoutCancel(ctx), h.key.owner.ID)
	kctx, cancel := context.WithCancelCause(base)
	k := &Lock{h: h, ctx: kctx, cancel: cancel}
	h.handles[k] = struct{}{}
	return k
}

// safetyMargin is how long before the server's idle timeout could end the
// session a holder that could not ping declares the lock lost: a tenth of
// the TTL, for scheduling delays and clocks that tick at slightly
// different rates.
func safetyMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// pingInterval is the pause between pings.
func (h *hold) pingInterval() time.Duration { return h.ttl / 3 }

// tick pings once and schedules the next ping: after TTL/3, or after
// TTL/20 while the connection is busy with an open result set. It stops
// when the lock is lost or stopPinging was called.
func (h *hold) tick() {
	h.tickMu.Lock()
	defer h.tickMu.Unlock()
	h.mu.Lock()
	stopped := h.stopped
	h.mu.Unlock()
	if stopped {
		return
	}
	outcome, err := h.ping(context.Background())
	next := h.pingInterval()
	switch {
	case err != nil:
		h.lose(err)
		return
	case outcome == pingTxEnded || outcome == pingTxAborted:
		h.lose(txGone(outcome))
		return
	case outcome == pingBusy:
		next = max(h.ttl/20, 10*time.Millisecond)
	}
	h.mu.Lock()
	if !h.stopped {
		h.timer.Reset(next)
	}
	h.mu.Unlock()
}

// stopPinging stops the pings and waits for one under way: none runs after
// it returns.
func (h *hold) stopPinging() {
	h.mu.Lock()
	h.stopped = true
	h.timer.Stop()
	h.mu.Unlock()
	h.tickMu.Lock()
	//lint:ignore SA2001 waiting for a running tick to finish
	h.tickMu.Unlock()
}

// ping checks the connection once. It fails when no ping has succeeded
// for TTL minus the safety margin: the server may have ended the session
// by then.
func (h *hold) ping(ctx context.Context) (pingOutcome, error) {
	h.pingMu.Lock()
	defer h.pingMu.Unlock()
	h.mu.Lock()
	alive := h.lastAlive
	h.mu.Unlock()
	limit := h.ttl - safetyMargin(h.ttl)
	if time.Since(alive) >= limit {
		return pingBusy, fmt.Errorf("no successful ping for %v (a result set of Tx left open?): the server may have ended the session", limit)
	}
	var outcome pingOutcome
	var sent time.Time
	err := h.conn.Raw(func(dc any) error {
		sent = clock.Now()
		deadline := alive.Add(limit)
		if !sent.Before(deadline) {
			// Raw waited for a statement of the lock's user to return: the
			// session was busy, not idle, until a moment ago.
			deadline = sent.Add(limit)
		}
		pctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		var err error
		outcome, err = h.l.d.ping(pctx, dc)
		if errors.Is(err, driver.ErrBadConn) {
			// Returned from Raw, ErrBadConn would make database/sql close
			// the connection, which waits for the open transaction: a
			// deadlock with Release. Keep the message, drop the sentinel.
			err = fmt.Errorf("connection broken: %w: %v", dblock.ErrUnavailable, err)
		}
		return err
	})
	if err == nil && outcome == pingAlive {
		h.mu.Lock()
		if sent.After(h.lastAlive) {
			h.lastAlive = sent
		}
		h.mu.Unlock()
	}
	return outcome, err
}

// lose marks the lock lost with cause and tells every handle, unless the
// lock is being released.
func (h *hold) lose(cause error) {
	h.mu.Lock()
	if h.lost != nil || h.closing {
		h.mu.Unlock()
		return
	}
	h.lost = fmt.Errorf("%w: %q: %w", dblock.ErrLockLost, h.name, lockkit.MarkUnavailable(cause))
	handles := make([]*Lock, 0, len(h.handles))
	for k := range h.handles {
		handles = append(handles, k)
	}
	h.mu.Unlock()
	h.l.cfg.logger.Warn("forupdate: lock lost", "name", h.name, "token", h.token, "error", cause)
	h.metrics.Lost(context.Background(), lostCause(cause))
	for _, k := range handles {
		k.lose(h.lost)
	}
}

// lostCause sorts why a hold was lost for the lost-locks metric.
func lostCause(cause error) metrics.Cause {
	if errors.Is(cause, errTxEnded) || errors.Is(cause, errTxAborted) {
		return metrics.CauseTransactionEnded
	}
	return metrics.CauseUnreachable
}
