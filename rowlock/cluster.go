package rowlock

import (
	"context"

	"github.com/sqllock/sqllock/internal/lockkit"
)

// # Galera clusters
//
// On a MariaDB Galera cluster (or Percona XtraDB Cluster) every node
// accepts writes, and lock rows, leases and tokens are replicated and
// certified like any rows. But GET_LOCK and IS_FREE_LOCK are each node's
// own: a waiter on node 2 would find the marker of a live holder on node
// 1 free, judge that holder crashed, and cut its lease short. So a
// session that finds its server is a Galera node (lockkit.GaleraQuery)
// takes no marker and no doorbells, for good: holds depend on their
// leases alone, waiters poll, and a waiter never judges a holder by a
// marker (watcher.watch, waiting's askWake refuse to). Crash recovery
// then takes up to one TTL instead of the crash grace.

// marking reports whether the session takes a marker (and so may hand its
// key to holds and waiters): markers wanted, and not on a Galera node.
func (s *session) marking() bool { return s.markers && !s.perNode.Load() }

// ringing reports whether waiters may arm doorbells.
func (s *session) ringing() bool { return s.bells && !s.perNode.Load() }

// checkCluster asks the session's server whether it is a Galera node, and
// turns markers and doorbells off for good if so.
func (s *session) checkCluster(ctx context.Context, sc sessionConn) error {
	var name, value string
	err := sc.query(ctx, lockkit.GaleraQuery, nil, &name, &value)
	galera, err := lockkit.IsGaleraAnswer(value, err)
	if err != nil {
		return err
	}
	if galera {
		s.perNode.Store(true)
		s.warnOnce("rowlock: the server is a node of a Galera cluster, where GET_LOCK is per node: " +
			"no session markers nor doorbells; a crashed holder blocks others for its lease, and waiters poll")
	}
	return nil
}
