package rowlock

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock/internal/clock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/metrics"
	"github.com/sqllock/sqllock/internal/pgxrow"
)

// session is a Locker's session connection: one connection, kept out of
// the pool while the Locker holds locks or has waiters (and for an idle
// period after), that carries what lives as long as a database session:
//
//   - the session marker, a session-scoped lock with a fresh random key
//     (PostgreSQL pg_advisory_lock, MySQL GET_LOCK) that the rows this
//     Locker takes record (session_key), so that others can tell that this
//     Locker's session has ended (see the package doc, Crash detection);
//   - on PostgreSQL with pgx, LISTEN for release announcements, which wake
//     the Locker's waiters;
//   - on MySQL, the doorbell that wakes other processes' waiters when this
//     Locker releases a lock they wait for (bell.go).
//
// Each connection is one incarnation with its own key; keys are never
// reused, so a marker that has gone never comes back.
type session struct {
	db      *sql.DB
	isPg    bool
	listen  bool          // LISTEN wanted (PostgreSQL, WithListen)
	bells   bool          // a doorbell wanted (MySQL, with markers; bell.go)
	rings   chan struct{} // ring requests (bell.go)
	noPgx   bool          // the driver turned out not to be pgx; only run's goroutine touches it
	markers bool          // session markers wanted (WithCrashGrace > 0)
	// perNode is set once the session found its server a node of a
	// Galera cluster (cluster.go): markers and bells are then off.
	perNode atomic.Bool
	grace   time.Duration // G: the crash grace
	idle    time.Duration
	probe   time.Duration // how long a NOTIFY round trip may take
	waiters *waitlist
	logger  *slog.Logger
	// pool is the Locker's pool; notify sends the NOTIFY of the round-trip
	// probe through it, as releases are sent (PostgreSQL only).
	pool    *sql.DB
	notify  func(ctx context.Context, channel, payload string) error
	metrics *metrics.Instruments

	mu        sync.Mutex
	cur       *incarnation // nil when no connection runs
	locks     map[*Lock]*incarnation
	waiting   bool // the Locker has waiters
	idleTimer *time.Timer
	closed    bool
	// retryAt is when a session that failed to start may be tried again;
	// until then acquisitions go without a marker and waiters poll.
	retryAt time.Time
	warned  map[string]bool // log lines said once
	// wakeup is the mode the Locker counts itself in (the wake-up
	// metric); "" after Close.
	wakeup metrics.WakeupMode
}

// setWakeup counts the Locker in the wake-up mode of a session that
// listens (notified) or not (polling).
func (s *session) setWakeup(listening bool) {
	mode := metrics.WakeupPolling
	if listening {
		mode = metrics.WakeupNotified
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wakeup == mode || (s.closed && s.wakeup == "") {
		return
	}
	ctx := context.Background()
	if s.wakeup != "" {
		s.metrics.Wakeup(ctx, s.wakeup, -1)
	}
	s.wakeup = mode
	s.metrics.Wakeup(ctx, mode, 1)
}

// clearWakeup stops counting the Locker (Close).
func (s *session) clearWakeup() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wakeup != "" {
		s.metrics.Wakeup(context.Background(), s.wakeup, -1)
		s.wakeup = ""
	}
}

// incarnation is one session connection and its marker.
type incarnation struct {
	key    int64 // the marker's key; 0 when there is no marker
	ready  chan struct{}
	failed chan struct{} // closed when it has ended
	cancel context.CancelFunc
	done   chan struct{}

	// Guarded by session.mu:
	listening bool      // LISTEN is in effect and a NOTIFY round trip came back
	deadline  time.Time // by the monotonic clock: the marker is trusted until then
}

// Session tuning.
const (
	// startBackoff is how long after a session failed to start the next
	// acquisition tries again; meanwhile locks are taken without a marker.
	startBackoff = 5 * time.Second
	// probeTimeout is how long the NOTIFY round trip may take before the
	// session connection is judged not to receive notifications (a
	// transaction pooler in front of it).
	probeTimeout = time.Second
	// sessionStartWait is how long an acquisition waits for a session
	// that is starting (a connection, LISTEN and its probe, the marker)
	// before it goes on without it.
	sessionStartWait = 3 * time.Second
)

// probeChannel carries the session's own NOTIFY round-trip probe.
const probeChannel = "dblock_session_probe"

// beatInterval is how often the session proves its marker is held: three
// chances before the 0.9·G deadline.
func (s *session) beatInterval() time.Duration { return s.grace / 3 }

// markerDeadline is how long after a successful heartbeat was sent the
// marker is trusted: a tenth of G short of it, as for leases.
func (s *session) markerDeadline(sent time.Time) time.Time {
	return sent.Add(s.grace - s.grace/10)
}

// newMarkerKey returns a random key in [1, 2^63).
func newMarkerKey() int64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // never fails (crypto/rand documents it)
		if k := int64(binary.LittleEndian.Uint64(b[:]) >> 1); k != 0 {
			return k
		}
	}
}

// markerName is the MySQL GET_LOCK name of key (at most 64 characters).
func markerName(key int64) string { return fmt.Sprintf("sqllock.%d", key) }

// key returns the marker key an acquisition records, starting the session
// if needed and waiting (within ctx) for it to be ready; 0 when there is no
// usable marker: the lock then depends on its lease alone.
func (s *session) key(ctx context.Context) int64 {
	inc := s.ensure(ctx)
	if inc == nil || !s.marking() {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A marker that is not proven fresh is not recorded: a lock born with
	// it could be lost at once.
	if inc != s.cur || inc.key == 0 || !clock.Now().Before(inc.deadline) {
		return 0
	}
	return inc.key
}

// listening starts the session if needed and reports whether releases in
// other processes will wake this Locker's waiters.
func (s *session) listening(ctx context.Context) bool {
	inc := s.ensure(ctx)
	if inc == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return inc == s.cur && inc.listening
}

// ensure returns the running incarnation, started if needed, once ready;
// nil if there is none and none can start now.
func (s *session) ensure(ctx context.Context) *incarnation {
	s.mu.Lock()
	inc := s.cur
	if inc == nil {
		if s.closed || clock.Now().Before(s.retryAt) || (!s.marking() && !s.listen) {
			s.mu.Unlock()
			return nil
		}
		inc = s.startLocked()
	}
	s.mu.Unlock()
	select {
	case <-inc.ready:
		return inc
	case <-inc.failed:
		return nil
	case <-ctx.Done():
		return nil
	default:
	}
	// A session that takes long to start (an unreachable session
	// database) must not hold acquisitions up: they go without it.
	wait := time.NewTimer(sessionStartWait)
	defer wait.Stop()
	select {
	case <-inc.ready:
		return inc
	case <-inc.failed:
		return nil
	case <-ctx.Done():
		return nil
	case <-wait.C:
		return nil
	}
}

// startLocked starts an incarnation; s.mu is held.
func (s *session) startLocked() *incarnation {
	runCtx, cancel := context.WithCancel(context.Background())
	inc := &incarnation{
		ready:  make(chan struct{}),
		failed: make(chan struct{}),
		cancel: cancel,
		done:   make(chan struct{}),
	}
	s.cur = inc
	s.armIdleLocked()
	go s.run(runCtx, inc)
	return inc
}

// register records that k was taken with key: if the session of key
// fails, k is lost. It reports false, and k is lost at once, when that
// session has already ended.
func (s *session) register(k *Lock, key int64) {
	s.mu.Lock()
	inc := s.cur
	if inc == nil || inc.key != key {
		s.mu.Unlock()
		k.lose(fmt.Errorf("%w: its session connection ended as it was taken", errSessionEnded))
		return
	}
	if s.locks == nil {
		s.locks = make(map[*Lock]*incarnation)
	}
	s.locks[k] = inc
	s.armIdleLocked()
	s.mu.Unlock()
}

// unregister forgets k (released or lost).
func (s *session) unregister(k *Lock) {
	s.mu.Lock()
	if _, ok := s.locks[k]; !ok {
		s.mu.Unlock()
		return
	}
	delete(s.locks, k)
	stop := s.armIdleLocked()
	s.mu.Unlock()
	stop()
}

// deadline is when k's marker stops being trusted; ok is false when k
// relies on no marker.
func (s *session) deadline(k *Lock) (d time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	inc, ok := s.locks[k]
	if !ok {
		return time.Time{}, false
	}
	return inc.deadline, true
}

// setWaiting tells the session whether the Locker has waiters. It runs
// under the waitlist's lock, which the session's goroutine takes to wake
// waiters: it never waits for that goroutine.
func (s *session) setWaiting(on bool) {
	s.mu.Lock()
	s.waiting = on
	_ = s.armIdleLocked() // after Close: canceled, not waited for
	s.mu.Unlock()
}

// armIdleLocked starts or stops the idle countdown after a change of what
// the session is used for; s.mu is held. After Close, an unused session
// stops at once: the returned func waits for it (call it without s.mu).
func (s *session) armIdleLocked() (stop func()) {
	inc := s.cur
	inUse := len(s.locks) > 0 || s.waiting
	if s.idleTimer != nil {
		s.idleTimer.Stop()
		s.idleTimer = nil
	}
	if inc == nil || inUse {
		return func() {}
	}
	if s.closed {
		s.cur = nil
		inc.cancel()
		return func() { <-inc.done }
	}
	s.idleTimer = time.AfterFunc(s.idle, inc.cancel)
	return func() {}
}

// close stops the session once no lock relies on it: locks held across
// the Locker's Close keep their marker until released.
func (s *session) close() {
	s.mu.Lock()
	s.closed = true
	stop := s.armIdleLocked()
	s.mu.Unlock()
	stop()
}

// warnOnce logs msg the first time it is said.
func (s *session) warnOnce(msg string, args ...any) {
	s.mu.Lock()
	if s.warned == nil {
		s.warned = make(map[string]bool)
	}
	said := s.warned[msg]
	s.warned[msg] = true
	s.mu.Unlock()
	if !said {
		s.logger.Warn(msg, args...)
	}
}

// run serves one incarnation until its context ends (idle, Close) or its
// connection fails; then every lock taken with its marker is lost.
func (s *session) run(ctx context.Context, inc *incarnation) {
	defer close(inc.done)
	err := s.serve(ctx, inc)
	stopped := ctx.Err() != nil
	s.mu.Lock()
	if s.cur == inc {
		s.cur = nil
	}
	if s.idleTimer != nil {
		s.idleTimer.Stop()
		s.idleTimer = nil
	}
	var lost []*Lock
	for k, kinc := range s.locks {
		if kinc == inc {
			lost = append(lost, k)
			delete(s.locks, k)
		}
	}
	if quiet := errors.Is(err, errNoPgx) || errors.Is(err, errNoSpareConn) ||
		errors.Is(err, errNoNotifications) || errors.Is(err, errNothingToKeep); quiet {
		// A setting, not an accident, and said once already.
		s.retryAt, err = clock.Now().Add(quietRetry), nil
	} else {
		select {
		case <-inc.ready:
		default:
			// It never became ready: do not hold every acquisition up
			// by trying again at once.
			s.retryAt = clock.Now().Add(startBackoff)
		}
	}
	s.mu.Unlock()
	inc.cancel()
	close(inc.failed)
	// Every lock still counted on this incarnation goes with its marker,
	// whatever ended it: even a session stopped while idle may have had a
	// lock registered in the moment between its idle timer firing and
	// this, and the marker that lock's row names is gone now.
	cause := fmt.Errorf("%w: session connection stopped", errSessionEnded)
	if err != nil {
		cause = fmt.Errorf("%w: session connection failed: %w", errSessionEnded, lockkit.MarkUnavailable(err))
	}
	for _, k := range lost {
		k.lose(cause)
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
	s.logger.Warn("rowlock: session connection ended; its locks are lost and a new one starts when needed",
		"error", err, "locks_lost", len(lost))
}

// sessionConn is the session connection as the serving loop uses it.
type sessionConn interface {
	// query runs a one-row query.
	query(ctx context.Context, query string, args []any, dest ...any) error
	// exec runs a statement that returns no rows.
	exec(ctx context.Context, stmt string, args ...any) error
	// wait blocks until a notification arrives or ctx ends.
	wait(ctx context.Context) (*pgconnNotification, error)
	// notifies reports whether wait can return notifications.
	notifies() bool
}

// pgconnNotification is a notification's channel and payload.
type pgconnNotification struct{ channel, payload string }

// serve opens the session connection and runs it.
func (s *session) serve(ctx context.Context, inc *incarnation) error {
	if s.db == s.pool {
		// A session connection stays checked out: the pool must spare it.
		if !reserveSessionConn(s.db) {
			s.warnOnce("rowlock: the pool cannot spare a session connection; waiters poll and dead holders are detected by their leases only",
				"max_open_conns", s.db.Stats().MaxOpenConnections)
			return errNoSpareConn
		}
		defer releaseSessionConn(s.db)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if s.isPg && s.listen && !s.noPgx {
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
	sc := sqlConn{c: conn, run: pgxrow.Wrap(s.db).On(conn), rings: s.rings}
	if !s.isPg {
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

// sessionConns counts, per pool, the session connections this process's
// Lockers hold checked out. In a pool with a limit they must leave at least
// one connection for everything else (tries, renewals, releases), or
// waiters would wait for a connection that only a release could free, and
// the release for one too.
var sessionConns = struct {
	sync.Mutex
	n map[*sql.DB]int
}{n: make(map[*sql.DB]int)}

// reserveSessionConn counts a session connection on db if the pool can
// spare it: no limit (db.SetMaxOpenConns(0), the default) or at least one
// connection left besides the session connections.
func reserveSessionConn(db *sql.DB) bool {
	sessionConns.Lock()
	defer sessionConns.Unlock()
	if limit := db.Stats().MaxOpenConnections; limit > 0 && limit-sessionConns.n[db] < 2 {
		return false
	}
	sessionConns.n[db]++
	return true
}

func releaseSessionConn(db *sql.DB) {
	sessionConns.Lock()
	defer sessionConns.Unlock()
	if sessionConns.n[db]--; sessionConns.n[db] <= 0 {
		delete(sessionConns.n, db)
	}
}

// loop readies the incarnation (LISTEN and its probe, the marker) and then
// heartbeats until ctx ends or the connection fails.
func (s *session) loop(ctx context.Context, inc *incarnation, sc sessionConn) error {
	listening := false
	if sc.notifies() {
		ok, err := s.startListening(ctx, sc)
		if err != nil {
			return err
		}
		listening = ok
	}
	var key int64
	var deadline time.Time
	bell := bells{cur: -1}
	if !s.isPg && s.markers && !s.perNode.Load() {
		if err := s.checkCluster(ctx, sc); err != nil {
			return err
		}
	}
	if s.marking() && (listening || !sc.notifies()) {
		// A session whose notifications do not come back is behind a
		// transaction pooler: a marker there would outlive this process
		// on a pooled server connection. Without a probe (no LISTEN),
		// the heartbeat's check of the marker's owner catches a pooler.
		k, sent, err := s.takeMarker(ctx, sc)
		if err != nil {
			return err
		}
		key, deadline = k, s.markerDeadline(sent)
		if s.bells {
			if bell, err = s.startBells(ctx, sc, key); err != nil {
				return err
			}
			defer bell.forget(sc)
		}
	}
	s.mu.Lock()
	inc.key, inc.deadline, inc.listening = key, deadline, listening
	s.mu.Unlock()
	if listening || bell.cur >= 0 {
		s.setWakeup(true)
		defer s.setWakeup(false)
	}
	close(inc.ready)
	if key == 0 && !listening {
		return errNothingToKeep
	}
	next := clock.Now().Add(s.beatInterval())
	for {
		wait := next.Sub(clock.Now())
		if key == 0 {
			wait = time.Hour // no marker: nothing to prove, only listen
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		n, err := sc.wait(wctx)
		timedOut := wctx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !timedOut:
			return err
		case n != nil && n.channel == ringRequest:
			if err := bell.ring(ctx, sc); err != nil {
				return fmt.Errorf("ringing the doorbell: %w", err)
			}
			continue
		case n != nil:
			if n.channel == releaseChannel {
				s.waiters.wakeFirst(n.payload)
			}
			continue
		}
		if key == 0 {
			continue
		}
		sent := clock.Now()
		next = sent.Add(s.beatInterval())
		if err := s.beat(ctx, inc, sc, key, sent); err != nil {
			return err
		}
	}
}

// startListening issues LISTEN and checks that a NOTIFY sent through the
// pool comes back on this connection: behind a transaction pooler LISTEN
// runs on some pooled server connection and nothing comes back, and
// waiters must poll. ok is false then; err is the connection's failure.
func (s *session) startListening(ctx context.Context, sc sessionConn) (ok bool, err error) {
	if err := sc.exec(ctx, "LISTEN "+probeChannel); err != nil {
		return false, err
	}
	token := fmt.Sprintf("%d", newMarkerKey())
	if err := s.notify(ctx, probeChannel, token); err != nil {
		return false, err
	}
	pctx, cancel := context.WithTimeout(ctx, s.probe)
	defer cancel()
	for {
		n, err := sc.wait(pctx)
		switch {
		case ctx.Err() != nil:
			return false, ctx.Err()
		case pctx.Err() != nil:
			s.warnOnce("rowlock: the session connection receives no notifications (a transaction pooler in front of it?): "+
				"waiters poll and dead holders are detected by their leases only; give rowlock.WithSessionDB a direct connection",
				"probe_timeout", s.probe)
			return false, errNoNotifications
		case err != nil:
			return false, err
		case n.channel == probeChannel && n.payload == token:
			if err := sc.exec(ctx, "LISTEN "+releaseChannel); err != nil {
				return false, err
			}
			return true, nil
		}
	}
}

// takeMarker takes a fresh marker on the session connection.
func (s *session) takeMarker(ctx context.Context, sc sessionConn) (key int64, sent time.Time, err error) {
	key = newMarkerKey()
	sent = clock.Now()
	var took bool
	if s.isPg {
		err = sc.query(ctx, "SELECT pg_try_advisory_lock($1)", []any{key}, &took)
	} else {
		var got sql.NullInt64
		err = sc.query(ctx, "SELECT GET_LOCK(?, 0)", []any{markerName(key)}, &got)
		took = got.Valid && got.Int64 == 1
	}
	if err != nil {
		return 0, sent, err
	}
	if !took {
		return 0, sent, fmt.Errorf("rowlock: session marker %d is taken", key)
	}
	return key, sent, nil
}

// Heartbeat statements: true when the marker is held by the session that
// answers. A transaction pooler would answer from another server session,
// where the marker is not: the session is then failed, and its locks lost.
const (
	pgBeat = `
SELECT EXISTS (SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted AND objsubid = 1
      AND classid = ($1::bigint >> 32)::oid AND objid = ($1::bigint & 4294967295)::oid)`
	myBeat = `SELECT IS_USED_LOCK(?) <=> CONNECTION_ID()`
)

// beat proves the marker is held and moves the deadline on.
func (s *session) beat(ctx context.Context, inc *incarnation, sc sessionConn, key int64, sent time.Time) error {
	s.mu.Lock()
	deadline := inc.deadline
	s.mu.Unlock()
	bctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var held bool
	var err error
	if s.isPg {
		err = sc.query(bctx, pgBeat, []any{key}, &held)
	} else {
		err = sc.query(bctx, myBeat, []any{markerName(key)}, &held)
	}
	switch {
	case err != nil && bctx.Err() != nil && ctx.Err() == nil:
		return fmt.Errorf("heartbeat not answered within %v of the last: %w", s.grace-s.grace/10, err)
	case err != nil:
		return err
	case !held:
		return errors.New("the session marker is not held by the session that answered (a pooler in front of the session connection?)")
	}
	s.mu.Lock()
	inc.deadline = s.markerDeadline(sent)
	s.mu.Unlock()
	return nil
}

// pgxConn is a session connection through pgx.
type pgxConn struct{ c *pgx.Conn }

func (p pgxConn) query(ctx context.Context, query string, args []any, dest ...any) error {
	// Exec mode: no named prepared statements, which a pooler would leak.
	return p.c.QueryRow(ctx, query, append([]any{pgx.QueryExecModeExec}, args...)...).Scan(dest...)
}

func (p pgxConn) exec(ctx context.Context, stmt string, args ...any) error {
	_, err := p.c.Exec(ctx, stmt, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	return err
}

func (p pgxConn) wait(ctx context.Context) (*pgconnNotification, error) {
	n, err := p.c.WaitForNotification(ctx)
	if err != nil {
		return nil, err
	}
	return &pgconnNotification{channel: n.Channel, payload: n.Payload}, nil
}

func (pgxConn) notifies() bool { return true }

// sqlConn is a session connection through database/sql: no notifications,
// but requests to ring the doorbell arrive as if they were one.
type sqlConn struct {
	c *sql.Conn
	// run runs statements on c that are not prepared (PostgreSQL), with
	// their arguments.
	run   pgxrow.Runner
	rings <-chan struct{}
	// stmts are the statements with arguments, prepared once on the
	// connection (MySQL; nil on PostgreSQL): go-sql-driver would otherwise
	// prepare, run and close each (a ring, on the path of a handoff, would
	// take two round trips).
	stmts map[string]*sql.Stmt
}

// stmt returns query prepared on the connection.
func (s sqlConn) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.stmts[query]; ok {
		return st, nil
	}
	st, err := s.c.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	s.stmts[query] = st
	return st, nil
}

// close closes the prepared statements.
func (s sqlConn) close() {
	for _, st := range s.stmts {
		_ = st.Close()
	}
}

// ringRequest is the channel of the notifications that ask the session to
// ring its doorbell.
const ringRequest = "sqllock ring request"

func (s sqlConn) query(ctx context.Context, query string, args []any, dest ...any) error {
	if s.stmts == nil {
		return s.run.QueryRowContext(ctx, query, args...).Scan(dest...)
	}
	if len(args) == 0 {
		return s.c.QueryRowContext(ctx, query).Scan(dest...)
	}
	st, err := s.stmt(ctx, query)
	if err != nil {
		return err
	}
	return st.QueryRowContext(ctx, args...).Scan(dest...)
}

func (s sqlConn) exec(ctx context.Context, query string, args ...any) error {
	if s.stmts == nil {
		_, err := s.run.ExecContext(ctx, query, args...)
		return err
	}
	if len(args) == 0 {
		_, err := s.c.ExecContext(ctx, query)
		return err
	}
	st, err := s.stmt(ctx, query)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(ctx, args...)
	return err
}

func (s sqlConn) wait(ctx context.Context) (*pgconnNotification, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.rings:
		return &pgconnNotification{channel: ringRequest}, nil
	}
}

func (sqlConn) notifies() bool { return false }
