package rowlock

import (
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/metrics"
	"github.com/sqllock/sqllock/internal/pgxrow"
	"github.com/sqllock/sqllock/internal/queue"
	"github.com/sqllock/sqllock/internal/stmtcache"
)

// Locker takes locks in the dblock_locks table. It is safe for concurrent
// use; create one per *sql.DB and share it.
type Locker struct {
	db      *sql.DB
	cfg     config
	store   store
	waiters waitlist
	sess    *session
	watch   *watcher
	metrics *metrics.Instruments
	queue   *queue.Queue
	closed  atomic.Bool
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
	q, err := queue.New(db, cfg.dialect, queue.WithWaiterTTL(cfg.waiterTTL), queue.WithLogger(cfg.logger),
		queue.WithMeterProvider(cfg.meters))
	if err != nil {
		return nil, fmt.Errorf("rowlock: %w", err)
	}
	l := &Locker{db: db, cfg: cfg, queue: q, metrics: meters}
	l.store = newStore(db, cfg.dialect, func() { l.sess.ring() })
	sessionDB := cfg.sessionDB
	if sessionDB == nil {
		sessionDB = db
	}
	l.sess = &session{
		db:      sessionDB,
		pool:    db,
		isPg:    cfg.dialect == dblock.Postgres,
		listen:  l.store.notifies() && cfg.listen,
		bells:   cfg.dialect == dblock.MySQL && cfg.wakesWaiters(),
		rings:   make(chan struct{}, 1),
		markers: cfg.crashGrace > 0,
		grace:   cfg.crashGrace,
		idle:    cfg.listenerIdle,
		probe:   probeTimeout,
		waiters: &l.waiters,
		logger:  cfg.logger,
		metrics: meters,
	}
	if pg, ok := l.store.(postgresStore); ok {
		l.sess.notify = pg.notify
	}
	l.sess.setWakeup(false)
	l.waiters.sess = l.sess
	l.watch = &watcher{db: db, store: l.store, queue: q, grace: cfg.crashGrace, waiters: &l.waiters, logger: cfg.logger, blockFor: markerWait,
		perNode: l.sess.perNode.Load}
	return l, nil
}

// newStore returns the store of dialect d, which is valid; ring rings the
// Locker's doorbell (MySQL).
func newStore(db *sql.DB, d dblock.Dialect, ring func()) store {
	switch d {
	case dblock.Postgres:
		pdb := pgxrow.Wrap(db)
		return postgresStore{listing: listing{pdb, listingSQL{pgLocks, pgHeld, pgCountLapsed}}, db: pdb, process: lockinput.ProcessHost()}
	case dblock.SQLite:
		return newSQLiteStore(db)
	}
	return mysqlStore{listing: listing{db, listingSQL{myLocks, myHeldByName, myCountLapsed}}, db: db, hot: stmtcache.New(db), process: lockinput.ProcessHost(), ring: ring,
		noSetStatement: new(atomic.Bool)}
}

// Dialect is the SQL dialect the Locker speaks.
func (l *Locker) Dialect() dblock.Dialect { return l.cfg.dialect }

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
	l.sess.close()
	l.sess.clearWakeup()
	l.watch.close()
	l.queue.Close()
	l.orphanMu.Lock()
	l.orphansDone = true
	l.orphanMu.Unlock()
	l.orphans.Wait()
	l.store.close()
	return nil
}
