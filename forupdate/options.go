package forupdate

import (
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// Defaults of the Locker options.
const (
	// DefaultTable is the table of lock rows, created by package migrations.
	DefaultTable = "dblock_forupdate"
	// CounterSuffix names the token counter after the table: a sequence on
	// PostgreSQL and MariaDB, a table on MySQL 8.0 (dblock_forupdate_tokens
	// by default).
	CounterSuffix = "_tokens"
	// DefaultConnTimeout bounds how long Acquire and TryAcquire wait for a
	// connection from the *sql.DB pool before failing with ErrNoConnection.
	DefaultConnTimeout = 5 * time.Second
)

// Option configures a Locker.
type Option func(*config)

type config struct {
	dialect     dblock.Dialect
	table       string
	logger      *slog.Logger
	meters      metric.MeterProvider
	connTimeout time.Duration
	singleNode  bool
	// failoverPause: see WithFailoverPause.
	failoverPause time.Duration
}

// WithSingleNode says that every lock of this Locker's table goes to one
// node of a Galera cluster (one writer node behind the proxy, say), so
// that the node's row locks are the cluster's. Default: off, and a Locker
// on a Galera node refuses to lock with ErrMultiPrimary.
func WithSingleNode() Option { return func(c *config) { c.singleNode = true } }

// WithDialect sets the SQL dialect. Default: detected from the driver
// (pgx, lib/pq: Postgres; go-sql-driver/mysql: MySQL).
func WithDialect(d dblock.Dialect) Option { return func(c *config) { c.dialect = d } }

// WithTable sets the table of lock rows: a plain identifier (letters, digits
// and underscores, not starting with a digit, at most 56 bytes so that the
// counter's name, the table's plus CounterSuffix, fits in 63), never
// quoted. Default DefaultTable.
func WithTable(name string) Option { return func(c *config) { c.table = name } }

// WithLogger sets where the Locker logs: locks lost, sessions that could
// not be restored; and the leader elections and cron guards built on the
// Locker. Default: slog.Default() at Warn and above,
// which is all the Locker itself logs.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithMeterProvider sets where the Locker's OpenTelemetry metrics go
// (acquisitions, wait and hold times, lost locks, waiters; see package
// internal/metrics for their names), and those of what is built on it.
// Default: the global MeterProvider (otel.GetMeterProvider), which records
// nothing until the application sets one.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.meters = mp } }

// WithConnTimeout bounds the wait for a pool connection; a Locker holds one
// connection per held (or awaited) lock, so an exhausted pool would
// otherwise block Acquire until a lock is released, or forever when the
// holders wait for something the blocked goroutine would do. Default
// DefaultConnTimeout.
func WithConnTimeout(d time.Duration) Option { return func(c *config) { c.connTimeout = d } }

// identifier leaves room for CounterSuffix within PostgreSQL's 63 bytes.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,55}$`)

func (c *config) validate() error {
	switch {
	case !c.dialect.Valid():
		return fmt.Errorf("forupdate: %w: %q", dblock.ErrUnknownDialect, c.dialect)
	case !identifier.MatchString(c.table):
		return fmt.Errorf("forupdate: %w", &dblock.OptionError{Option: "WithTable", Reason: fmt.Sprintf("%q is not a plain SQL identifier", shorten(c.table))})
	case c.logger == nil:
		return fmt.Errorf("forupdate: %w", &dblock.OptionError{Option: "WithLogger", Reason: "nil logger"})
	case c.meters == nil:
		return fmt.Errorf("forupdate: %w", &dblock.OptionError{Option: "WithMeterProvider", Reason: "nil MeterProvider"})
	case !lockkit.ValidFailoverPause(c.failoverPause):
		return fmt.Errorf("forupdate: %w", lockkit.FailoverPauseError())
	case c.connTimeout <= 0:
		return fmt.Errorf("forupdate: %w", &dblock.OptionError{Option: "WithConnTimeout", Reason: "must be positive, got " + c.connTimeout.String()})
	}
	return nil
}

// shorten cuts what an error echoes of an input: a 10 MB table name must
// not come back as a 10 MB message.
func shorten(s string) string {
	const keep = 64
	if len(s) <= keep {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:keep], len(s))
}
