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
)

// Defaults of the Locker options.
const (
	// DefaultMinPollInterval is the first pause of a MySQL waiter between
	// tries; it doubles up to the maximum after each failed try.
	DefaultMinPollInterval = 5 * time.Millisecond
	// DefaultMaxPollInterval caps the pause between tries of a waiter that
	// is notified of releases (PostgreSQL with LISTEN, MySQL with the
	// doorbell): it polls only for leases that lapse without a release.
	DefaultMaxPollInterval = time.Second
	// DefaultMaxPollIntervalPolling caps the pause of a waiter that must
	// poll for releases (WithListen off, no session connection, or a
	// holder whose session does not ring): a handoff to another
	// process takes about half of it. Only the first waiter of a name in
	// each Locker polls, with one primary-key read while the lease has time
	// left, so this costs about 100 cheap reads a second per waiting
	// Locker, whatever the number of waiters.
	DefaultMaxPollIntervalPolling = 10 * time.Millisecond
	// DefaultListenerIdle is how long the session connection (see
	// WithSessionDB) is kept after the Locker's last lock was released and
	// its last waiter left.
	DefaultListenerIdle = 30 * time.Second
	// DefaultCrashGrace is how long after its session ended a holder's
	// lock can be taken (see WithCrashGrace).
	DefaultCrashGrace = time.Second
)

// Option configures a Locker.
type Option func(*config)

type config struct {
	dialect dblock.Dialect
	logger  *slog.Logger
	minPoll time.Duration
	maxPoll time.Duration
	// maxPollUnnotified caps the pauses of waiters that must poll for
	// releases: maxPoll, or DefaultMaxPollIntervalPolling by default.
	maxPollUnnotified time.Duration
	listenerIdle      time.Duration
	listen            bool
	waiterTTL         time.Duration
	idleRecheck       time.Duration
	sessionDB         *sql.DB
	crashGrace        time.Duration
	meters            metric.MeterProvider
}

// WithDialect sets the SQL dialect. Default: detected from the driver
// (pgx, lib/pq: Postgres; go-sql-driver/mysql: MySQL).
func WithDialect(d dblock.Dialect) Option { return func(c *config) { c.dialect = d } }

// WithLogger sets where the Locker logs: renewals that fail, locks lost,
// the listener falling back to polling, the fair queue's heartbeats; and,
// through Logger, the leader elections, cron guards and reaper built on the
// Locker. Default: slog.Default() at Warn and above, which is all the
// Locker itself logs.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// Logger is the Locker's logger (WithLogger), which the packages built on
// a Locker log to.
func (l *Locker) Logger() *slog.Logger { return l.cfg.logger }

// WithMeterProvider sets where the Locker's OpenTelemetry metrics go
// (acquisitions, wait and hold times, locks lost by cause, renewal
// failures, waiters, how waiters are woken; see package internal/metrics
// for the names). Attributes never carry lock names. Default: the global
// MeterProvider (otel.GetMeterProvider), which records nothing until the
// application sets one.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.meters = mp } }

// MeterProvider is the Locker's meter provider (WithMeterProvider); the
// reaper records its sweeps through it.
func (l *Locker) MeterProvider() metric.MeterProvider { return l.cfg.meters }

// WithPollInterval sets the range of pauses between a waiter's tries.
// Default DefaultMinPollInterval to DefaultMaxPollInterval when releases are
// notified (PostgreSQL with LISTEN, MySQL with the doorbell: see
// WithListen), DefaultMaxPollIntervalPolling otherwise.
func WithPollInterval(minimum, maximum time.Duration) Option {
	return func(c *config) { c.minPoll, c.maxPoll = minimum, maximum }
}

// WithListen turns PostgreSQL LISTEN/NOTIFY wake-ups on or off. Default on
// with the pgx driver (it needs pgx's WaitForNotification); waiters poll
// when off. The listener keeps one pool connection checked out while it
// runs, so it starts only when the pool can spare one: no limit
// (db.SetMaxOpenConns(0), the default), or one connection left for
// everything else besides the listeners of this process on that pool.
// Otherwise waiters poll, as with WithListen(false); lowering the limit
// below that while a listener runs can starve the pool.
func WithListen(on bool) Option { return func(c *config) { c.listen = on } }

// WithListenerIdle sets how long the session connection outlives the
// Locker's last lock and last waiter. Default DefaultListenerIdle.
func WithListenerIdle(d time.Duration) Option { return func(c *config) { c.listenerIdle = d } }

// WithSessionDB sets where the Locker's session connection comes from: one
// connection kept out of the pool while the Locker holds locks or has
// waiters, which carries the session marker (see the package doc, Crash
// detection) and, on PostgreSQL with pgx, LISTEN. Give a *sql.DB with a
// direct connection to the server when the Locker's own goes through a
// transaction pooler (PgBouncer in transaction mode): through a pooler,
// notifications never come back and a marker would outlive its process, so
// the Locker notices (a NOTIFY round trip, the heartbeat's check), logs it
// once, and goes without: waiters poll (at most every
// DefaultMaxPollIntervalPolling) and dead holders are detected by their
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

// DefaultWaiterTTL is how long a fair waiter stays queued without a
// heartbeat (see WithWaiterTTL).
const DefaultWaiterTTL = 10 * time.Second

// WithWaiterTTL sets how long a fair waiter stays queued without a
// heartbeat: a waiter whose process died holds up the queue this long.
// Its waiters heartbeat every TTL/3. Default DefaultWaiterTTL, at least
// 100 ms.
func WithWaiterTTL(d time.Duration) Option { return func(c *config) { c.waiterTTL = d } }

// DefaultIdleRecheck is how often a waiter that is not the first of its name
// in its Locker checks the lock on its own; the first one polls and is woken
// by releases, and wakes the next when it leaves. The first is the fair
// waiter with the oldest place in the queue, or, with no fair waiter, the
// longest-waiting one.
const DefaultIdleRecheck = 30 * time.Second

// WithIdleRecheck sets how often waiters that are not the first of their
// name in the Locker check the lock on their own: a safety net that costs
// one try per waiter per period. Default DefaultIdleRecheck.
func WithIdleRecheck(d time.Duration) Option { return func(c *config) { c.idleRecheck = d } }

// minCrashGrace is the shortest crash grace: its heartbeats come every
// G/3, and each must be answered within 0.9·G of the last.
const minCrashGrace = 100 * time.Millisecond

// newConfig applies opts over the defaults, resolves the dialect of db and
// checks the result.
func newConfig(db *sql.DB, opts []Option) (config, error) {
	cfg := config{
		logger:       logging.Default(),
		minPoll:      DefaultMinPollInterval,
		maxPoll:      0, // by dialect: see setPollCaps
		listenerIdle: DefaultListenerIdle,
		listen:       true,
		waiterTTL:    DefaultWaiterTTL,
		idleRecheck:  DefaultIdleRecheck,
		crashGrace:   DefaultCrashGrace,
		meters:       metrics.Default(),
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

// setPollCaps fills in the caps on waiters' pauses that WithPollInterval
// left to the dialect.
func (c *config) setPollCaps() {
	if c.maxPoll != 0 {
		c.maxPollUnnotified = c.maxPoll
		return
	}
	// Waiters notified of releases poll only for lapsed leases; the
	// others poll for releases too, and a handoff waits half a pause.
	c.maxPoll = DefaultMaxPollInterval
	if !c.wakesWaiters() {
		c.maxPoll = DefaultMaxPollIntervalPolling
	}
	// Waiters of a Locker that listens poll for releases too while
	// it cannot (no connection to spare, or the connection was lost).
	c.maxPollUnnotified = min(c.maxPoll, DefaultMaxPollIntervalPolling)
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
	case c.minPoll <= 0 || c.maxPoll < c.minPoll:
		return fmt.Errorf("rowlock: %w", &dblock.OptionError{Option: "WithPollInterval", Reason: "need 0 < min <= max"})
	case c.idleRecheck <= 0:
		return fmt.Errorf("rowlock: %w", &dblock.OptionError{Option: "WithIdleRecheck", Reason: "must be positive"})
	case c.listenerIdle < 0:
		return fmt.Errorf("rowlock: %w", &dblock.OptionError{Option: "WithListenerIdle", Reason: "must not be negative"})
	case c.crashGrace < 0 || c.crashGrace > 0 && c.crashGrace < minCrashGrace:
		return fmt.Errorf("rowlock: %w", &dblock.OptionError{Option: "WithCrashGrace", Reason: "must be 0 (off) or at least 100ms"})
	case c.meters == nil:
		return fmt.Errorf("rowlock: %w", &dblock.OptionError{Option: "WithMeterProvider", Reason: "nil MeterProvider"})
	case c.logger == nil:
		return fmt.Errorf("rowlock: %w", &dblock.OptionError{Option: "WithLogger", Reason: "nil logger"})
	}
	return nil
}
