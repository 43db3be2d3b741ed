package forupdate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/clock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/logging"
	"github.com/sqllock/sqllock/internal/metrics"
)

// Locker takes locks that are row locks held by open transactions. It is
// safe for concurrent use; create one per *sql.DB and share it: reentrancy
// works within one Locker.
type Locker struct {
	db      *sql.DB
	cfg     config
	d       dialect
	metrics *metrics.Instruments

	mu sync.Mutex
	// holds are the locks held through this Locker, by name and owner.
	holds map[holdKey]*hold
	// pending are the acquisitions under way, so that a second Acquire by
	// the same owner waits for the first and re-enters instead of waiting
	// in the database for a lock its own owner is about to hold.
	pending map[holdKey]chan struct{}
	// restoring are the sessions being restored after their lock ended.
	restoring tasks
	// clusterChecked is set once the server was found not to be a node
	// of a multi-primary cluster (or WithSingleNode); see checkCluster.
	clusterChecked atomic.Bool
	// replication tells once whether the PostgreSQL primary has a
	// synchronous standby (checkReplication).
	replication lockkit.ReplicationCheck
}

// checkCluster refuses, with ErrMultiPrimary, to lock on a Galera node,
// unless WithSingleNode. It asks the server once; a failed question is
// asked again at the next acquisition. On PostgreSQL it tells once whether
// the primary has a synchronous standby (checkReplication).
func (l *Locker) checkCluster(ctx context.Context) error {
	l.checkReplication(ctx)
	if l.cfg.dialect != dblock.MySQL || l.cfg.singleNode || l.clusterChecked.Load() {
		return nil
	}
	galera, err := lockkit.IsGalera(ctx, l.db)
	if err != nil {
		return lockkit.WrapDBError("forupdate: cluster check", err)
	}
	if galera {
		return ErrMultiPrimary
	}
	l.clusterChecked.Store(true)
	return nil
}

type holdKey struct {
	name  string
	owner dblock.Owner
}

var _ dblock.Locker = (*Locker)(nil)

// Code built on a Locker (cronguard, gocronlock, leader) logs where the
// Locker does, and asks it once, when it is built, whether it accepts its
// options (checkOptions).
func init() {
	lockkit.Declare((*Locker)(nil), lockkit.Capabilities{
		Logger:       func(l dblock.Locker) *slog.Logger { return l.(*Locker).cfg.logger },
		CheckOptions: checkOptions,
	})
}

// New returns a Locker over db, whose table (DefaultTable) must have been
// created with migrations.Up. It does no I/O and never closes db.
func New(db *sql.DB, opts ...Option) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("forupdate: %w: nil *sql.DB", dblock.ErrInvalidDB)
	}
	cfg := config{
		table:         DefaultTable,
		logger:        logging.Default(),
		meters:        metrics.Default(),
		connTimeout:   DefaultConnTimeout,
		failoverPause: DefaultFailoverPause,
	}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("forupdate: %w", &dblock.OptionError{Option: "Option", Reason: "nil option"})
		}
		opt(&cfg)
	}
	d, err := lockkit.ResolveDialect(db, cfg.dialect)
	if err != nil {
		return nil, fmt.Errorf("forupdate: %w", err)
	}
	cfg.dialect = d
	if d == dblock.SQLite {
		return nil, ErrNoRowLocks
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	meters, err := metrics.New(cfg.meters, "forupdate")
	if err != nil {
		return nil, fmt.Errorf("forupdate: %w", &dblock.OptionError{Option: "WithMeterProvider", Reason: err.Error()})
	}
	l := &Locker{db: db, cfg: cfg, metrics: meters, holds: make(map[holdKey]*hold), pending: make(map[holdKey]chan struct{})}
	switch cfg.dialect {
	case dblock.Postgres:
		l.d = newPostgres(db, cfg.table, cfg.table+CounterSuffix, cfg.pause())
	case dblock.MySQL:
		l.d = newMySQL(db, cfg.table, cfg.table+CounterSuffix)
	}
	return l, nil
}

// Close waits for the connections of released locks to be back in the
// pool (on MySQL their sessions are restored after Release returns) and
// releases the statements the Locker prepared (MySQL) once no call uses
// them. Locks held stay held until released, and the Locker stays usable,
// its statements then unprepared; call Close when done with it. Close never
// closes the *sql.DB.
func (l *Locker) Close() error {
	l.restoring.wait()
	l.d.close()
	return nil
}

// Dialect is the SQL dialect the Locker speaks.
func (l *Locker) Dialect() dblock.Dialect { return l.cfg.dialect }

// Acquire waits in the database until name is locked for the owner in ctx
// (a fresh one if ctx carries none), or re-enters at once if that owner
// holds it already through this Locker. Ending ctx stops the wait on the
// server too and leaves no transaction behind; the error then joins
// dblock.ErrNotAcquired and ctx.Err(). The returned dblock.Lock is a *Lock.
//
// Options: dblock.TTL sets how long the server keeps the session of a
// holder that falls silent (see the package doc); dblock.Note is ignored;
// dblock.Fair and a positive dblock.MinHold are refused with
// dblock.ErrInvalidOption.
//
// Errors: dblock.ErrInvalidName, dblock.ErrInvalidOption, ErrNoConnection,
// dblock.ErrSchemaMissing, dblock.ErrInvalidDB, or a driver error.
func (l *Locker) Acquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return asLock(l.acquire(ctx, request{kind: kindLock, name: name}, opts, true))
}

// TryAcquire takes name if no one else holds it (SELECT ... FOR UPDATE
// NOWAIT), or re-enters it if the owner in ctx holds it through this
// Locker; otherwise it returns dblock.ErrNotAcquired at once. Options and
// errors as Acquire.
func (l *Locker) TryAcquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return asLock(l.acquire(ctx, request{kind: kindLock, name: name}, opts, false))
}

// acquire is Acquire (wait) or TryAcquire, measured as req's lock type.
func (l *Locker) acquire(ctx context.Context, req request, opts []dblock.Option, wait bool) (*Lock, error) {
	mctx := ctx
	if mctx == nil {
		mctx = context.Background() // refused by prepare; still counted
	}
	in := l.metrics.As(req.lockType())
	mode := metrics.ModeTry
	if wait {
		mode = metrics.ModeWait
		in.Waiting(mctx, false, 1)
		defer in.Waiting(mctx, false, -1)
	}
	started := clock.Now()
	k, err := l.acquireUnmeasured(ctx, req, opts, wait)
	result := metrics.ResultAcquired
	switch {
	case errors.Is(err, dblock.ErrNotAcquired):
		result = metrics.ResultNotAcquired
	case err != nil:
		result = metrics.ResultError
	}
	in.Acquisition(mctx, mode, result, clock.Now().Sub(started))
	return k, err
}

func (l *Locker) acquireUnmeasured(ctx context.Context, req request, opts []dblock.Option, wait bool) (*Lock, error) {
	o, owner, err := prepare(ctx, req, opts)
	if err != nil {
		return nil, err
	}
	if err := l.checkCluster(ctx); err != nil {
		return nil, err
	}
	key := holdKey{name: req.key(), owner: owner}
	for {
		l.mu.Lock()
		if h := l.holds[key]; h != nil {
			if err := h.admits(req); err != nil {
				l.mu.Unlock()
				return nil, err
			}
			if k := h.enter(ctx); k != nil {
				l.mu.Unlock()
				return k, nil
			}
		}
		if busy, ok := l.pending[key]; ok {
			l.mu.Unlock()
			if !wait {
				return nil, dblock.ErrNotAcquired
			}
			select {
			case <-busy:
				continue
			case <-ctx.Done():
				return nil, errors.Join(dblock.ErrNotAcquired, ctx.Err())
			}
		}
		done := make(chan struct{})
		l.pending[key] = done
		l.mu.Unlock()

		h, err := l.take(ctx, req, key, o, wait)

		l.mu.Lock()
		delete(l.pending, key)
		close(done)
		var k *Lock
		if err == nil {
			if k = h.enter(ctx); k != nil {
				l.holds[key] = h
			}
		}
		l.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if k == nil {
			// Lost before its first handle existed (the first ping failed).
			h.mu.Lock()
			h.closing = true
			lost := h.lost
			h.mu.Unlock()
			_ = h.finish(ctx, false)
			return nil, lost
		}
		return k, nil
	}
}

// forget drops h from the registry, unless a newer hold replaced it.
// Called with l.mu held.
func (l *Locker) forget(h *hold) {
	if l.holds[h.key] == h {
		delete(l.holds, h.key)
	}
}

func prepare(ctx context.Context, req request, opts []dblock.Option) (dblock.Options, dblock.Owner, error) {
	if ctx == nil {
		return dblock.Options{}, dblock.Owner{}, &dblock.OptionError{Option: "ctx", Reason: "nil context"}
	}
	if err := req.validate(); err != nil {
		return dblock.Options{}, dblock.Owner{}, err
	}
	o, err := resolveOptions(opts)
	if err != nil {
		return dblock.Options{}, dblock.Owner{}, err
	}
	owner, err := lockinput.OwnerFor(ctx)
	if err != nil {
		return dblock.Options{}, dblock.Owner{}, err
	}
	if err := ctx.Err(); err != nil {
		return dblock.Options{}, dblock.Owner{}, errors.Join(dblock.ErrNotAcquired, err)
	}
	return o, owner, nil
}

// checkOptions reports, without I/O, whether the Acquire and TryAcquire of
// a Locker or its kinds accept opts: they refuse dblock.Fair and a positive
// dblock.MinHold, besides what lockinput.ResolveOptions refuses. Errors
// wrap dblock.ErrInvalidOption. Declared (lockkit.Capabilities), it lets
// code handed a Locker (cronguard, gocronlock, leader) refuse a
// configuration when it is built rather than at every run.
func checkOptions(_ dblock.Locker, opts ...dblock.Option) error {
	_, err := resolveOptions(opts)
	return err
}

// resolveOptions resolves opts and refuses those forupdate cannot honour.
func resolveOptions(opts []dblock.Option) (dblock.Options, error) {
	o, err := lockinput.ResolveOptions(opts...)
	if err != nil {
		return dblock.Options{}, err
	}
	switch {
	case o.Fair:
		return dblock.Options{}, &dblock.OptionError{Option: "Fair", Reason: "not supported by forupdate: the database decides the order of waiters"}
	case o.MinHold > 0:
		return dblock.Options{}, &dblock.OptionError{Option: "MinHold", Reason: "not supported by forupdate: the lock ends with its transaction"}
	}
	return o, nil
}
