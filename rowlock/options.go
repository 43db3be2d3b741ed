package rowlock

import (
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/logging"
	"github.com/sqllock/sqllock/internal/metrics"
	"github.com/sqllock/sqllock/internal/queue"
	"github.com/sqllock/sqllock/internal/tuning"
)

// DefaultCrashGrace is how long after its session ended a holder's lock
// can be taken (see WithCrashGrace).
const DefaultCrashGrace = time.Second

// How waiters pace their tries and how long the session connection idles.
// They are not options: the defaults serve every user, and tests that must
// tell a wake-up from a poll set them through withPacing.
const (
	// defaultMinPoll is the first pause of a waiter between tries; it
	// doubles up to the cap after each failed try.
	defaultMinPoll = 5 * time.Millisecond
	// defaultMaxPollNotified caps the pause between tries of a waiter that
	// is notified of releases (PostgreSQL with LISTEN, MySQL with the
	// doorbell): it polls only for leases that lapse without a release.
	defaultMaxPollNotified = time.Second
	// defaultMaxPollPolling caps the pause of a waiter that must poll for
	// releases (WithListen off, no session connection, or a holder whose
	// session does not ring): a handoff to another process takes about
	// half of it. Only the first waiter of a name in each Locker polls,
	// with one primary-key read while the lease has time left, so this
	// costs about 100 cheap reads a second per waiting Locker, whatever
	// the number of waiters.
	defaultMaxPollPolling = 10 * time.Millisecond
	// defaultSessionIdle is how long the session connection (see
	// WithSessionDB) is kept after the Locker's last lock was released and
	// its last waiter left.
	defaultSessionIdle = 30 * time.Second
	// defaultIdleRecheck is how often a waiter that is not the first of
	// its name in its Locker checks the lock on its own: a safety net that
	// costs one try per waiter per period. The first one polls and is
	// woken by releases, and wakes the next when it leaves.
	defaultIdleRecheck = 30 * time.Second
)

// Option configures a Locker.
type Option func(*config)

type config struct {
	dialect       dblock.Dialect
	logger        *slog.Logger
	pacing        pacing
	listen        bool
	waiterTTL     time.Duration
	sessionDB     *sql.DB
	crashGrace    time.Duration
	failoverPause time.Duration
	meters        metric.MeterProvider
}

// pacing is how waiters pace their tries and how long the session
// connection idles: the defaults above, or a test's (withPacing).
type pacing struct {
	minPoll time.Duration
	maxPoll time.Duration // 0: by dialect (see setPollCaps)
	// maxPollUnnotified caps the pauses of waiters that must poll for
	// releases: maxPoll, or defaultMaxPollPolling by default.
	maxPollUnnotified time.Duration
	idleRecheck       time.Duration
	sessionIdle       time.Duration
}

// withPacing overrides the pacing fields of p that are not zero. Only
// tests use it (export_test.go, internal/tuning).
func withPacing(p pacing) Option {
	return func(c *config) {
		if p.minPoll != 0 || p.maxPoll != 0 {
			c.pacing.minPoll, c.pacing.maxPoll = p.minPoll, p.maxPoll
		}
		if p.idleRecheck != 0 {
			c.pacing.idleRecheck = p.idleRecheck
		}
		if p.sessionIdle != 0 {
			c.pacing.sessionIdle = p.sessionIdle
		}
	}
}

// WithDialect sets the SQL dialect. Default: detected from the driver
// (pgx, lib/pq: Postgres; go-sql-driver/mysql: MySQL).
func WithDialect(d dblock.Dialect) Option { return func(c *config) { c.dialect = d } }

// WithLogger sets where the Locker logs: renewals that fail, locks lost,
// the listener falling back to polling, the fair queue's heartbeats; and
// the leader elections, cron guards and reaper built on the Locker. Default: slog.Default() at Warn and above, which is all the
// Locker itself logs.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithMeterProvider sets where the Locker's OpenTelemetry metrics go
// (acquisitions, wait and hold times, locks lost by cause, renewal
// failures, waiters, how waiters are woken; see package internal/metrics
// for the names), and the reaper's sweeps. Attributes never carry lock
// names. Default: the global
// MeterProvider (otel.GetMeterProvider), which records nothing until the
// application sets one.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.meters = mp } }

// WithListen turns PostgreSQL LISTEN/NOTIFY wake-ups on or off. Default on
// with the pgx driver (it needs pgx's WaitForNotification); waiters poll
// when off. The listener keeps one pool connection checked out while it
// runs, so it starts only when the pool can spare one: no limit
// (db.SetMaxOpenConns(0), the default), or one connection left for
// everything else besides the listeners of this process on that pool.
// Otherwise waiters poll, as with WithListen(false); lowering the limit
// below that while a listener runs can starve the pool.
func WithListen(on bool) Option { return func(c *config) { c.listen = on } }

// WithSessionDB sets where the Locker's session connection comes from: one
// connection kept out of the pool while the Locker holds locks or has
// waiters, which carries the session marker (docs/design.md, Crash
// detection) and, on PostgreSQL with pgx, LISTEN. Give a *sql.DB with a
// direct connection to the server when the Locker's own goes through a
// transaction pooler (PgBouncer in transaction mode): through a pooler,
// notifications never come back and a marker would outlive its process, so
// the Locker notices (a NOTIFY round trip, the heartbeat's check), logs it
// once, and goes without: waiters poll (at most every 10 ms) and dead holders are detected by their
// leases only. Default: the Locker's own *sql.DB, from which the session
// connection is taken only if the pool can spare it (see WithListen). The
// Locker never closes it.
func WithSessionDB(db *sql.DB) Option { return func(c *config) { c.sessionDB = db } }

// WithCrashGrace sets G, how soon a dead holder's locks can be taken: a
// contender that finds the holder's session marker gone shortens its lease
// to G from then, by the database clock, and a live holder whose session
// heartbeat (every G/3) has not been answered for 0.9·G declares its locks
// lost. So a holder that crashes, or whose connection the server or the
// network cuts, blocks others for about G, whatever the TTL, instead of
// the whole lease. Dead fair waiters are
// passed over the same way. Shorter is faster recovery, and more
// heartbeats, and more locks declared lost when the session connection
// hiccups; 0 turns markers off, and the lease alone decides. Default
// DefaultCrashGrace; at least 100 ms. On SQLite, which has no sessions, it
// is always 0.
func WithCrashGrace(d time.Duration) Option { return func(c *config) { c.crashGrace = d } }

// WithWaiterTTL sets how long a fair waiter stays queued without a
// heartbeat: a waiter whose process died holds up the queue this long.
// Its waiters heartbeat every TTL/3. Default queue.DefaultWaiterTTL (10
// s), at least queue.MinWaiterTTL (100 ms).
func WithWaiterTTL(d time.Duration) Option { return func(c *config) { c.waiterTTL = d } }

// minCrashGrace is the shortest crash grace: its heartbeats come every
// G/3, and each must be answered within 0.9·G of the last.
const minCrashGrace = 100 * time.Millisecond

// newConfig applies opts over the defaults, resolves the dialect of db and
// checks the result.
func newConfig(db *sql.DB, opts []Option) (config, error) {
	cfg := config{
		logger: logging.Default(),
		pacing: pacing{
			minPoll:     defaultMinPoll,
			idleRecheck: defaultIdleRecheck,
			sessionIdle: defaultSessionIdle,
		},
		listen:        true,
		waiterTTL:     queue.DefaultWaiterTTL,
		crashGrace:    DefaultCrashGrace,
		meters:        metrics.Default(),
		failoverPause: DefaultFailoverPause,
	}
	for _, opt := range opts {
		if opt == nil {
			return config{}, fmt.Errorf("rowlock: %w", &dblock.OptionError{Option: "Option", Reason: "nil option"})
		}
		opt(&cfg)
	}
	d, err := lockkit.ResolveDialect(db, cfg.dialect)
	if err != nil {
		return config{}, fmt.Errorf("rowlock: %w", err)
	}
	cfg.dialect = d
	if d == dblock.SQLite {
		cfg.crashGrace = 0 // no sessions to mark: leases alone (see the package doc)
	}
	cfg.setPollCaps()
	if err := cfg.validate(); err != nil {
		return config{}, err
	}
	return cfg, nil
}

// setPollCaps fills in the caps on waiters' pauses that a test's pacing
// left to the dialect.
func (c *config) setPollCaps() {
	p := &c.pacing
	if p.maxPoll != 0 {
		p.maxPollUnnotified = p.maxPoll
		return
	}
	// Waiters notified of releases poll only for lapsed leases; the
	// others poll for releases too, and a handoff waits half a pause.
	p.maxPoll = defaultMaxPollNotified
	if !c.wakesWaiters() {
		p.maxPoll = defaultMaxPollPolling
	}
	// Waiters of a Locker that listens poll for releases too while
	// it cannot (no connection to spare, or the connection was lost).
	p.maxPollUnnotified = min(p.maxPoll, defaultMaxPollPolling)
}

// wakesWaiters reports whether releases in other processes can wake this
// Locker's waiters: LISTEN on PostgreSQL, the doorbell on MySQL (which
// lives on the session connection of crash detection).
func (c *config) wakesWaiters() bool {
	return c.listen && (c.dialect == dblock.Postgres || c.crashGrace > 0)
}

func (c *config) validate() error {
	switch {
	case !c.dialect.Valid():
		return fmt.Errorf("rowlock: %w: %q", dblock.ErrUnknownDialect, c.dialect)
	case c.pacing.minPoll <= 0 || c.pacing.maxPoll < c.pacing.minPoll:
		// Only a test's pacing can be wrong: say so loudly.
		return fmt.Errorf("rowlock: %w", &dblock.OptionError{Option: "withPacing", Reason: "need 0 < min <= max"})
	case c.crashGrace < 0 || c.crashGrace > 0 && c.crashGrace < minCrashGrace:
		return fmt.Errorf("rowlock: %w", &dblock.OptionError{Option: "WithCrashGrace", Reason: "must be 0 (off) or at least 100ms"})
	case !lockkit.ValidFailoverPause(c.failoverPause):
		return fmt.Errorf("rowlock: %w", lockkit.FailoverPauseError())
	case c.meters == nil:
		return fmt.Errorf("rowlock: %w", &dblock.OptionError{Option: "WithMeterProvider", Reason: "nil MeterProvider"})
	case c.logger == nil:
		return fmt.Errorf("rowlock: %w", &dblock.OptionError{Option: "WithLogger", Reason: "nil logger"})
	}
	return nil
}

// The module's tests of other packages pace waiters through package
// tuning; users cannot.
func init() {
	tuning.Register(func(minimum, maximum time.Duration) any {
		return withPacing(pacing{minPoll: minimum, maxPoll: maximum})
	})
}
