package rowlock

import (
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/metrics"
	"github.com/sqllock/sqllock/internal/pgxrow"
	"github.com/sqllock/sqllock/internal/queue"
	"github.com/sqllock/sqllock/internal/stmtcache"
	"github.com/sqllock/sqllock/internal/wake"
)

// Locker takes locks in the dblock_locks table. It is safe for concurrent
// use; create one per *sql.DB and share it.
type Locker struct {
	db      *sql.DB
	cfg     config
	store   store
	waiters *wake.List
	sess    *wake.Session
	watch   *wake.Watcher
	metrics *metrics.Instruments
	queue   *queue.Queue
	closed  atomic.Bool
	// replication tells once whether the PostgreSQL primary has a
	// synchronous standby (checkReplication).
	replication lockkit.ReplicationCheck
	// orphans counts the drops of holds that cut-short acquisitions may
	// have left (dropOrphan); Close waits for them, and later ones run in
	// their callers (orphansDone).
	orphans     sync.WaitGroup
	orphanMu    sync.Mutex
	orphansDone bool
}

var _ dblock.Locker = (*Locker)(nil)

// New returns a Locker over db, whose tables must have been created with
// migrations.Up. It does no I/O. It never closes db.
func New(db *sql.DB, opts ...Option) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("rowlock: %w: nil *sql.DB", dblock.ErrInvalidDB)
	}
	cfg, err := newConfig(db, opts)
	if err != nil {
		return nil, err
	}
	meters, err := metrics.New(cfg.meters, "rowlock")
	if err != nil {
		return nil, fmt.Errorf("rowlock: %w", &dblock.OptionError{Option: "WithMeterProvider", Reason: err.Error()})
	}
	q, err := queue.New(db, queue.WithDialect(cfg.dialect), queue.WithWaiterTTL(cfg.waiterTTL), queue.WithLogger(cfg.logger),
		queue.WithMeterProvider(cfg.meters))
	if err != nil {
		return nil, fmt.Errorf("rowlock: %w", err)
	}
	l := &Locker{db: db, cfg: cfg, queue: q, metrics: meters}
	l.store = newStore(db, cfg.dialect, cfg.pause(), newWakeID(), func() { l.sess.Ring() })
	// The session stays up while the Locker has waiters: the list tells it,
	// under the list's lock, so that busy and idle never arrive out of order.
	l.waiters = wake.NewList(func(busy bool) { l.sess.SetWaiting(busy) })
	sessionDB := cfg.sessionDB
	if sessionDB == nil {
		sessionDB = db
	}
	sc := wake.SessionConfig{
		DB: sessionDB, Pool: db, Postgres: cfg.dialect == dblock.Postgres,
		Listen: l.store.notifies() && cfg.listen, Bells: cfg.dialect == dblock.MySQL && cfg.wakesWaiters(),
		Grace: cfg.crashGrace, Idle: cfg.pacing.sessionIdle,
		Waiters: l.waiters, Logger: cfg.logger, Metrics: meters,
		Ended: errSessionEnded, ReleaseChannel: releaseChannel,
	}
	switch st := l.store.(type) {
	case postgresStore:
		sc.Notify = st.notify
	case mysqlStore:
		sc.Cluster = st.galera // asked once, by whichever needs it first
	}
	l.sess = wake.NewSession(sc)
	l.watch = l.newWatcher(wake.MarkerWait)
	return l, nil
}

// newWatcher returns the Locker's watcher, each of whose blocked waits
// lasts blockFor.
func (l *Locker) newWatcher(blockFor time.Duration) *wake.Watcher {
	return wake.NewWatcher(wake.WatcherConfig{DB: l.db, Store: l.store, Queue: l.queue, Grace: l.cfg.crashGrace,
		Waiters: l.waiters, Logger: l.cfg.logger, BlockFor: blockFor, PerNode: l.sess.PerNode})
}

// newStore returns the store of dialect d, which is valid; pause is the
// failover pause (PostgreSQL); wakeID is the Locker's wake identity (see
// newWakeID); ring rings the Locker's doorbell (MySQL).
func newStore(db *sql.DB, d dblock.Dialect, pause time.Duration, wakeID string, ring func()) store {
	switch d {
	case dblock.Postgres:
		pdb := pgxrow.Wrap(db)
		return postgresStore{listing: listing{pdb, listingSQL{pgLocks, pgHeld, pgCountLapsed}}, db: pdb, pause: pause, process: wakeID}
	case dblock.SQLite:
		return newSQLiteStore(db)
	}
	return mysqlStore{listing: listing{db, listingSQL{myLocks, myHeldByName, myCountLapsed}}, db: db, hot: stmtcache.New(db), process: wakeID, ring: ring,
		noSetStatement: new(atomic.Bool), galera: new(wake.Cluster)}
}

// Close refuses new acquisitions with dblock.ErrClosed and stops the
// Locker's session connection once no lock needs its marker. Locks already
// held stay held (and renewed) until released. Acquire calls in flight keep waiting, polling;
// their places in the fair queue are no longer kept alive and lapse after
// the waiter TTL, unless they leave the queue first (by getting the lock or
// giving up), which deletes them. Close waits for the drops, running in
// the background, of holds that acquisitions cut short by their context
// may have left (each at most 10 s). Close never closes the *sql.DB.
func (l *Locker) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	l.sess.Close()
	l.sess.ClearWakeup()
	l.watch.Close()
	l.queue.Close()
	l.orphanMu.Lock()
	l.orphansDone = true
	l.orphanMu.Unlock()
	l.orphans.Wait()
	l.store.close()
	return nil
}
