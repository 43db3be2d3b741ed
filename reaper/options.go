package reaper

import (
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/rowops"
)

// Defaults of the options.
const (
	// DefaultSchedule runs the reaper once a minute.
	DefaultSchedule = "@every 1m"

	// DefaultBatchSize is how many rows one short transaction deletes.
	DefaultBatchSize = 1000
	// MaxBatchSize bounds WithBatchSize, so one transaction never holds
	// many row locks (and a MySQL statement's placeholders stay few).
	MaxBatchSize = rowops.MaxSweepBatch

	// DefaultGrace is how long after its lease lapsed a lock row is kept:
	// a released row carries its name's token, and a name used again soon
	// takes its row over more cheaply than it creates a new one.
	DefaultGrace = time.Minute

	// DefaultLockName is the lock that lets one replica sweep at a time.
	DefaultLockName = "sqllock/reaper"
)

// Option configures a Reaper.
type Option func(*config)

type config struct {
	schedule  string
	batchSize int
	grace     time.Duration
	lockName  string
}

// WithSchedule sets when Start runs the reaper, as a robfig/cron spec: five
// fields ("*/5 * * * *"), a descriptor ("@hourly", "@every 30s"), optionally
// prefixed with "CRON_TZ=Area/City ". Default DefaultSchedule.
func WithSchedule(spec string) Option { return func(c *config) { c.schedule = spec } }

// WithBatchSize sets how many lock rows one batch looks at (and so at most
// deletes, in one transaction), and how many dead waiters one transaction
// deletes, from 1 to MaxBatchSize. Smaller batches hold fewer row
// locks for less time; larger ones sweep faster. Default DefaultBatchSize.
func WithBatchSize(n int) Option { return func(c *config) { c.batchSize = n } }

// WithGrace sets how long after its lease lapsed (by the database clock) a
// lock row, or a waiter's heartbeat, is left alone. Default DefaultGrace; 0
// deletes everything that has lapsed.
func WithGrace(d time.Duration) Option { return func(c *config) { c.grace = d } }

// WithLockName sets the name of the lock that keeps two replicas from
// sweeping at once. Reapers on one database must share it. Default
// DefaultLockName.
func WithLockName(name string) Option { return func(c *config) { c.lockName = name } }

func (c *config) validate() error {
	var err error
	switch {
	case c.batchSize < 1 || c.batchSize > MaxBatchSize:
		err = &dblock.OptionError{Option: "WithBatchSize", Reason: fmt.Sprintf("must be 1 to %d, got %d", MaxBatchSize, c.batchSize)}
	case c.grace < 0:
		err = &dblock.OptionError{Option: "WithGrace", Reason: "must not be negative, got " + c.grace.String()}
	default:
		if nameErr := lockinput.ValidateName(c.lockName); nameErr != nil {
			return fmt.Errorf("reaper: WithLockName: %w", nameErr)
		}
		return nil
	}
	return fmt.Errorf("reaper: %w", err)
}
