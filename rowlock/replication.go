package rowlock

import "context"

// checkReplication tells once, through the Locker's logger and metrics,
// whether its PostgreSQL primary has no synchronous standby
// (lockkit.ReplicationCheck). It costs one statement, at the first try
// that reaches the server, and an atomic load after that.
func (l *Locker) checkReplication(ctx context.Context) {
	if pg, ok := l.store.(postgresStore); ok {
		l.replication.Check(ctx, pg.db, "rowlock", l.cfg.logger, l.metrics)
	}
}
