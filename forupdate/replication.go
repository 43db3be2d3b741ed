package forupdate

import "context"

// checkReplication tells once, through the Locker's logger and metrics,
// whether its PostgreSQL primary has no synchronous standby
// (lockkit.ReplicationCheck). It costs one statement, at the first
// acquisition that reaches the server, and an atomic load after that.
func (l *Locker) checkReplication(ctx context.Context) {
	if pg, ok := l.d.(*postgres); ok {
		l.replication.Check(ctx, pg.db, "forupdate", l.cfg.logger, l.metrics)
	}
}
