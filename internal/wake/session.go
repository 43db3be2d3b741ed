package wake

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sqllock/sqllock/internal/clock"
	"github.com/sqllock/sqllock/internal/metrics"
)

// Session is a Locker's session connection: one connection, kept out of
// the pool while the Locker holds locks or has waiters (and for an idle
// period after), that carries what lives as long as a database session:
//
//   - the session marker, a session-scoped lock with a fresh random key
//     (PostgreSQL pg_advisory_lock, MySQL GET_LOCK) that the rows this
//     Locker takes record (session_key), so that others can tell that this
//     Locker's session has ended (docs/design.md, Crash detection);
//   - on PostgreSQL with pgx, LISTEN for release announcements, which wake
//     the Locker's waiters;
//   - on MySQL, the doorbell that wakes other processes' waiters when this
//     Locker releases a lock they wait for (bell.go).
//
// Each connection is one incarnation with its own key; keys are never
// reused, so a marker that has gone never comes back.
type Session struct {
	cfg   SessionConfig // as NewSession got it (Cluster set); never changed
	rings chan struct{} // ring requests (bell.go)
	noPgx bool          // the driver turned out not to be pgx; only run's goroutine touches it

	mu        sync.Mutex
	cur       *incarnation // nil when no connection runs
	locks     map[Held]*incarnation
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

// SessionConfig is what a Session is made of. Every field but Notify
// (PostgreSQL) and Cluster (MySQL) is required.
type SessionConfig struct {
	// DB is where the session connection comes from; Pool is the Locker's
	// pool (the same, unless rowlock.WithSessionDB).
	DB, Pool *sql.DB
	// Postgres is the dialect: PostgreSQL, or else MySQL.
	Postgres bool
	// Listen asks for LISTEN (PostgreSQL); Bells for a doorbell (MySQL).
	Listen, Bells bool
	// Grace is the crash grace G: markers are taken when it is over 0.
	Grace time.Duration
	// Idle is how long the connection outlives its last use.
	Idle    time.Duration
	Waiters *List
	Logger  *slog.Logger
	Metrics *metrics.Instruments
	// Notify sends a NOTIFY through the pool (PostgreSQL).
	Notify func(ctx context.Context, channel, payload string) error
	// Cluster is shared with the store, so that the server is asked once
	// whether it is a Galera node; nil for a Session of its own.
	Cluster *Cluster
	// Ended is the error the causes of locks lost with the session wrap.
	Ended error
	// ReleaseChannel is the channel releases are announced on.
	ReleaseChannel string
}

// NewSession returns the session of a Locker; no connection is opened
// until a lock or a waiter needs one.
func NewSession(c SessionConfig) *Session {
	if c.Cluster == nil {
		c.Cluster = new(Cluster)
	}
	s := &Session{cfg: c, rings: make(chan struct{}, 1)}
	s.SetWakeup(false)
	return s
}

// SetWakeup counts the Locker in the wake-up mode of a session that
// listens (notified) or not (polling).
func (s *Session) SetWakeup(listening bool) {
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
		s.cfg.Metrics.Wakeup(ctx, s.wakeup, -1)
	}
	s.wakeup = mode
	s.cfg.Metrics.Wakeup(ctx, mode, 1)
}

// ClearWakeup stops counting the Locker (Close).
func (s *Session) ClearWakeup() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wakeup != "" {
		s.cfg.Metrics.Wakeup(context.Background(), s.wakeup, -1)
		s.wakeup = ""
	}
}

// markers reports whether session markers are wanted (a crash grace,
// rowlock.WithCrashGrace, over 0).
func (s *Session) markers() bool { return s.cfg.Grace > 0 }

// WantsListen reports whether the session is to LISTEN (PostgreSQL with
// pgx, unless turned off), whether or not it does now.
func (s *Session) WantsListen() bool { return s.cfg.Listen }

// Held is a lock taken under the session's marker: it is lost when the
// marker's session ends.
type Held interface {
	// SessionLost ends the lock with cause, which wraps
	// SessionConfig.Ended.
	SessionLost(cause error)
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

// key returns the marker key an acquisition records, starting the session
// if needed and waiting (within ctx) for it to be ready; 0 when there is no
// usable marker: the lock then depends on its lease alone.
func (s *Session) Key(ctx context.Context) int64 {
	inc := s.ensure(ctx)
	if inc == nil || !s.Marking() {
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
func (s *Session) Listening(ctx context.Context) bool {
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
func (s *Session) ensure(ctx context.Context) *incarnation {
	s.mu.Lock()
	inc := s.cur
	if inc == nil {
		if s.closed || clock.Now().Before(s.retryAt) || (!s.Marking() && !s.cfg.Listen) {
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
func (s *Session) startLocked() *incarnation {
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
func (s *Session) Register(k Held, key int64) {
	s.mu.Lock()
	inc := s.cur
	if inc == nil || inc.key != key {
		s.mu.Unlock()
		k.SessionLost(fmt.Errorf("%w: its session connection ended as it was taken", s.cfg.Ended))
		return
	}
	if s.locks == nil {
		s.locks = make(map[Held]*incarnation)
	}
	s.locks[k] = inc
	s.armIdleLocked()
	s.mu.Unlock()
}

// unregister forgets k (released or lost).
func (s *Session) Unregister(k Held) {
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
func (s *Session) Deadline(k Held) (d time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	inc, ok := s.locks[k]
	if !ok {
		return time.Time{}, false
	}
	return inc.deadline, true
}

// setWaiting tells the session whether the Locker has waiters. It runs
// under the List's lock, which the session's goroutine takes to wake
// waiters: it never waits for that goroutine.
func (s *Session) SetWaiting(on bool) {
	s.mu.Lock()
	s.waiting = on
	_ = s.armIdleLocked() // after Close: canceled, not waited for
	s.mu.Unlock()
}

// armIdleLocked starts or stops the idle countdown after a change of what
// the session is used for; s.mu is held. After Close, an unused session
// stops at once: the returned func waits for it (call it without s.mu).
func (s *Session) armIdleLocked() (stop func()) {
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
	s.idleTimer = time.AfterFunc(s.cfg.Idle, inc.cancel)
	return func() {}
}

// close stops the session once no lock relies on it: locks held across
// the Locker's Close keep their marker until released.
func (s *Session) Close() {
	s.mu.Lock()
	s.closed = true
	stop := s.armIdleLocked()
	s.mu.Unlock()
	stop()
}

// warnOnce logs msg the first time it is said.
func (s *Session) warnOnce(msg string, args ...any) {
	s.mu.Lock()
	if s.warned == nil {
		s.warned = make(map[string]bool)
	}
	said := s.warned[msg]
	s.warned[msg] = true
	s.mu.Unlock()
	if !said {
		s.cfg.Logger.Warn(msg, args...)
	}
}
