package lockkit

import (
	"context"
	"database/sql"
	"log/slog"
	"sync/atomic"

	"github.com/sqllock/sqllock/internal/metrics"
)

// PgSyncQuery answers true on a PostgreSQL server whose commits wait for a
// synchronous standby: one is named (synchronous_standby_names) and
// commits wait for it (synchronous_commit on, remote_write or
// remote_apply). Any role may read both settings; pg_stat_replication
// shows its sync_state only to superusers and pg_read_all_stats. A named
// standby that is away makes commits wait: it loses none.
const PgSyncQuery = `SELECT current_setting('synchronous_standby_names') <> ''
  AND current_setting('synchronous_commit') IN ('on', 'remote_write', 'remote_apply')`

// AsyncPrimaryMessage is logged once per Locker whose PostgreSQL primary
// has no synchronous standby, after the package's name.
const AsyncPrimaryMessage = "the PostgreSQL primary has no synchronous standby: " +
	"a failover may lose acquisitions, renewals and releases it acknowledged; " +
	"fencing tokens still never repeat nor go backwards (they carry the WAL timeline), " +
	"and takes wait for the failover pause after a promotion, so that no two holders overlap"

// ReplicationCheck tells once, through a Locker's logger and metrics,
// whether the PostgreSQL primary it reaches has a synchronous standby. Its
// zero value is ready.
type ReplicationCheck struct {
	done    atomic.Bool
	running atomic.Bool
}

// Check asks db with PgSyncQuery, once: a call while another asks, or
// after an answer, does nothing, and a failed question is asked again at
// the next call (the acquisition that made it reports its own errors). pkg
// prefixes the log line ("rowlock").
func (c *ReplicationCheck) Check(ctx context.Context, db interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, pkg string, logger *slog.Logger, in *metrics.Instruments) {
	if c.done.Load() || !c.running.CompareAndSwap(false, true) {
		return
	}
	defer c.running.Store(false)
	var synced bool
	if err := db.QueryRowContext(ctx, PgSyncQuery).Scan(&synced); err != nil {
		return
	}
	c.done.Store(true)
	mode := metrics.ReplicationSync
	if !synced {
		mode = metrics.ReplicationAsync
		logger.Info(pkg + ": " + AsyncPrimaryMessage)
	}
	in.Replication(ctx, mode)
}
