package wake

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sqllock/sqllock/internal/clock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/pgxrow"
)

// run serves one incarnation until its context ends (idle, Close) or its
// connection fails; then every lock taken with its marker is lost.
func (s *Session) run(ctx context.Context, inc *incarnation) {
	defer close(inc.done)
	err := s.serve(ctx, inc)
	stopped := ctx.Err() != nil
	lost, err := s.detach(inc, err)
	inc.cancel()
	close(inc.failed)
	// Every lock still counted on this incarnation goes with its marker,
	// whatever ended it: even a session stopped while idle may have had a
	// lock registered in the moment between its idle timer firing and
	// this, and the marker that lock's row names is gone now.
	cause := fmt.Errorf("%w: session connection stopped", s.cfg.Ended)
	if err != nil {
		cause = fmt.Errorf("%w: session connection failed: %w", s.cfg.Ended, lockkit.MarkUnavailable(err))
	}
	for _, k := range lost {
		k.SessionLost(cause)
	}
	if err == nil || stopped && len(lost) == 0 {
		return
	}
	if len(lost) == 0 {
		// Nothing was lost: say so, and once, since a connection that
		// cannot be had (a DSN typo, a server down) fails at every retry.
		s.warnOnce("rowlock: session connection failed; no lock was lost, and until one works "+
			"a dead holder's locks are taken over only when their leases lapse", "error", err)
		return
	}
	s.cfg.Logger.Warn("rowlock: session connection ended; its locks are lost and a new one starts when needed",
		"error", err, "locks_lost", len(lost))
}

// detach takes the ended incarnation inc off the session and returns the
// locks registered on it, and err, the cause it ended with, unless that was
// a setting (nil then). It sets when the next incarnation may start.
func (s *Session) detach(inc *incarnation, err error) (lost []Held, _ error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == inc {
		s.cur = nil
	}
	if s.idleTimer != nil {
		s.idleTimer.Stop()
		s.idleTimer = nil
	}
	for k, kinc := range s.locks {
		if kinc == inc {
			lost = append(lost, k)
			delete(s.locks, k)
		}
	}
	if quiet := errors.Is(err, errNoPgx) || errors.Is(err, errNoSpareConn) ||
		errors.Is(err, errNoNotifications) || errors.Is(err, errNothingToKeep); quiet {
		// A setting, not an accident, and said once already.
		s.retryAt = clock.Now().Add(quietRetry)
		return lost, nil
	}
	select {
	case <-inc.ready:
	default:
		// It never became ready: do not hold every acquisition up by
		// trying again at once.
		s.retryAt = clock.Now().Add(startBackoff)
	}
	return lost, err
}

// serve opens the session connection and runs it.
func (s *Session) serve(ctx context.Context, inc *incarnation) error {
	if s.cfg.DB == s.cfg.Pool {
		// A session connection stays checked out: the pool must spare it.
		if !reserveConn(s.cfg.DB) {
			s.warnOnce("rowlock: the pool cannot spare a session connection; waiters poll and dead holders are detected by their leases only",
				"max_open_conns", s.cfg.DB.Stats().MaxOpenConnections)
			return errNoSpareConn
		}
		defer releaseConn(s.cfg.DB)
	}
	conn, err := s.cfg.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if s.cfg.Postgres && s.cfg.Listen && !s.noPgx {
		err := conn.Raw(func(dc any) error {
			pc, ok := dc.(interface{ Conn() *pgx.Conn })
			if !ok {
				return errNoPgx
			}
			// The connection carries a marker and LISTEN: never hand it
			// back to the pool.
			return errors.Join(s.loop(ctx, inc, pgxConn{pc.Conn()}), driver.ErrBadConn)
		})
		if !errors.Is(err, errNoPgx) {
			return ignoreBadConn(err)
		}
		s.noPgx = true // for good: markers go on without LISTEN
		s.warnOnce("rowlock: LISTEN needs the pgx driver; waiters poll")
	}
	// On pgx the statements run in a mode that works through a pooler
	// (pgxrow); other drivers (lib/pq) take their arguments as given.
	sc := sqlConn{c: conn, run: pgxrow.Wrap(s.cfg.DB).On(conn), rings: s.rings}
	if !s.cfg.Postgres {
		// A PostgreSQL session connection may be behind a pooler, where
		// named prepared statements break; MySQL's is not.
		sc.stmts = make(map[string]*sql.Stmt)
		defer sc.close()
	}
	err = s.loop(ctx, inc, sc)
	// Discard the connection: it may hold the marker.
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	return err
}

// ignoreBadConn drops the driver.ErrBadConn that serve joins to discard the
// connection.
func ignoreBadConn(err error) error {
	var errs interface{ Unwrap() []error }
	if !errors.As(err, &errs) {
		if errors.Is(err, driver.ErrBadConn) {
			return nil
		}
		return err
	}
	var kept []error
	for _, e := range errs.Unwrap() {
		if e != driver.ErrBadConn {
			kept = append(kept, e)
		}
	}
	return errors.Join(kept...)
}

// Reasons a session does not start; the next try waits for quietRetry.
var (
	// errNoPgx means the driver is not pgx: no LISTEN, waiters poll.
	errNoPgx = errors.New("rowlock: LISTEN needs the pgx driver")
	// errNoSpareConn means the pool's limit leaves no connection for it.
	errNoSpareConn = errors.New("rowlock: the pool cannot spare a session connection")
	// errNoNotifications means a NOTIFY round trip did not come back.
	errNoNotifications = errors.New("rowlock: the session connection receives no notifications")
	// errNothingToKeep means neither a marker nor LISTEN is possible.
	errNothingToKeep = errors.New("rowlock: nothing to keep a session connection for")
)

// quietRetry is how long after a session could not be had for one of the
// reasons above the next try waits: they are settings, not accidents.
const quietRetry = 10 * time.Minute
