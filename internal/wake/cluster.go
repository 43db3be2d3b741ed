package wake

import (
	"context"
	"database/sql"
	"sync/atomic"

	"github.com/sqllock/sqllock/internal/lockkit"
)

// Marking reports whether the session takes a marker (and so may hand its
// key to holds and waiters): markers wanted, and not on a Galera node.
func (s *Session) Marking() bool { return s.markers() && !s.PerNode() }

// Ringing reports whether waiters may arm doorbells.
func (s *Session) Ringing() bool { return s.cfg.Bells && !s.PerNode() }

// PerNode reports that the server was found a Galera node, where session
// locks are each node's own.
func (s *Session) PerNode() bool { return s.cfg.Cluster.galera.Load() }

// checkCluster asks the session's server whether it is a Galera node,
// unless the store asked already, and turns markers and doorbells off for
// good if so.
func (s *Session) checkCluster(ctx context.Context, sc sessionConn) error {
	galera, err := s.cfg.Cluster.answer(func() (bool, error) {
		var name, value string
		err := sc.query(ctx, lockkit.GaleraQuery, nil, &name, &value)
		return lockkit.IsGaleraAnswer(value, err)
	})
	if err != nil {
		return err
	}
	if galera {
		s.warnOnce("rowlock: the server is a node of a Galera cluster, where GET_LOCK is per node: " +
			"no session markers nor doorbells; a crashed holder blocks others for its lease, and waiters poll")
	}
	return nil
}

// Cluster remembers whether a Locker's server is a Galera node. The
// first to need it asks (the session as it starts, CheckHeld on its
// transaction's connection, a sweep); a server does not join or leave a
// cluster while it serves.
type Cluster struct{ known, galera atomic.Bool }

// Is reports whether q's server is a Galera node, asking it only once.
func (g *Cluster) Is(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) (bool, error) {
	return g.answer(func() (bool, error) { return lockkit.IsGalera(ctx, q) })
}

// answer is the recorded answer, or ask's, recorded: galera first, so
// that whoever sees known sees it. Two first askers both ask; they get
// the same answer.
func (g *Cluster) answer(ask func() (bool, error)) (bool, error) {
	if g.known.Load() {
		return g.galera.Load(), nil
	}
	galera, err := ask()
	if err != nil {
		return false, err
	}
	g.galera.Store(galera)
	g.known.Store(true)
	return galera, nil
}
