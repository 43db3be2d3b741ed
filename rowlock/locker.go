package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/clock"
	"github.com/sqllock/sqllock/internal/lockkit"
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
	ln      *listener // nil when waiters poll
	queue   *queue.Queue
	closed  atomic.Bool
}

var _ dblock.Locker = (*Locker)(nil)

// New returns a Locker over db, whose tables must have been created with
// migrations.Up. It does no I/O. It never closes db.
func New(db *sql.DB, opts ...Option) (*Locker, error) {
	if db == nil {
		return nil, fmt.Errorf("rowlock: %w: nil *sql.DB", dblock.ErrInvalidDB)
	}
	cfg := config{
		logger:       slog.New(slog.DiscardHandler),
		minPoll:      DefaultMinPollInterval,
		maxPoll:      0, // by dialect, below
		listenerIdle: DefaultListenerIdle,
		listen:       true,
		waiterTTL:    DefaultWaiterTTL,
		idleRecheck:  DefaultIdleRecheck,
	}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("rowlock: %w", &dblock.OptionError{Option: "Option", Reason: "nil option"})
		}
		opt(&cfg)
	}
	d, err := lockkit.ResolveDialect(db, cfg.dialect)
	if err != nil {
		return nil, fmt.Errorf("rowlock: %w", err)
	}
	cfg.dialect = d
	if cfg.maxPoll == 0 {
		// Waiters notified of releases poll only for lapsed leases; the
		// others poll for releases too, and a handoff waits half a pause.
		cfg.maxPoll = DefaultMaxPollInterval
		if cfg.dialect != dblock.Postgres || !cfg.listen {
			cfg.maxPoll = DefaultMaxPollIntervalPolling
		}
		// Waiters of a Locker that listens poll for releases too while
		// it cannot (no connection to spare, or the connection was lost).
		cfg.maxPollUnnotified = min(cfg.maxPoll, DefaultMaxPollIntervalPolling)
	} else {
		cfg.maxPollUnnotified = cfg.maxPoll
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	q, err := queue.New(db, cfg.dialect, queue.WithWaiterTTL(cfg.waiterTTL), queue.WithLogger(cfg.logger))
	if err != nil {
		return nil, fmt.Errorf("rowlock: %w", err)
	}
	l := &Locker{db: db, cfg: cfg, queue: q}
	switch cfg.dialect {
	case dblock.Postgres:
		l.store = postgresStore{db: db, process: lockkit.ProcessHost()}
	case dblock.MySQL:
		l.store = mysqlStore{db: db, hot: stmtcache.New(db)}
	}
	if l.store.notifies() && cfg.listen {
		l.ln = &listener{
			db:   db,
			idle: cfg.listenerIdle,
			wake: l.waiters.wakeFirst,
			log:  func(msg string, args ...any) { cfg.logger.Warn(msg, args...) },
		}
	}
	l.waiters.onBusy = func() {
		busyLockers.Lock()
		busyLockers.set[l] = struct{}{}
		busyLockers.Unlock()
		if l.ln != nil {
			l.ln.busy()
		}
	}
	l.waiters.onIdle = func() {
		busyLockers.Lock()
		delete(busyLockers.set, l)
		busyLockers.Unlock()
		if l.ln != nil {
			l.ln.idleNow()
		}
	}
	return l, nil
}

// Dialect is the SQL dialect the Locker speaks.
func (l *Locker) Dialect() dblock.Dialect { return l.cfg.dialect }

// Close stops the Locker's listening connection and refuses new
// acquisitions with dblock.ErrClosed. Locks already held stay held (and
// renewed) until released. Acquire calls in flight keep waiting, polling;
// their places in the fair queue are no longer kept alive and lapse after
// the waiter TTL, unless they leave the queue first (by getting the lock or
// giving up), which deletes them. Close never closes the *sql.DB.
func (l *Locker) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	if l.ln != nil {
		l.ln.close()
	}
	l.queue.Close()
	l.store.close()
	return nil
}

// TryAcquire takes name if it is free, its lease has lapsed, or the owner in
// ctx holds it already; otherwise it returns dblock.ErrNotAcquired at once.
// For a name used before it is one statement (an UPDATE of its row); a fresh
// name costs a second one that inserts the row (a short transaction on
// MySQL). If ctx ends before the statements return (a row locked by
// someone's transaction makes them wait), the error joins
// dblock.ErrNotAcquired and ctx.Err().
// Errors: dblock.ErrInvalidName, dblock.ErrInvalidOption, dblock.ErrClosed,
// dblock.ErrSchemaMissing, dblock.ErrInvalidDB, or a driver error.
func (l *Locker) TryAcquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	a, o, owner, err := l.prepare(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	out, sent, err := l.try(ctx, a)
	if err != nil {
		return nil, err
	}
	if !out.acquired {
		return nil, dblock.ErrNotAcquired
	}
	return l.newLock(ctx, a, o, owner, out.token, sent), nil
}

// Acquire waits until name is held or ctx ends; see the package doc for
// how waiters are woken. When ctx ends first the error joins
// dblock.ErrNotAcquired and ctx.Err(). Other errors as TryAcquire.
//
// With dblock.Fair, a waiter that cannot take the lock at once joins the
// queue and takes it only when all older live waiters have
// had it. Acquirers that are not fair never pass a live queue either: they
// take the lock only when no fair waiter is queued, but keep no place.
// Re-entering a lock the owner holds bypasses the queue.
func (l *Locker) Acquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	a, o, owner, err := l.prepare(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	w := l.waiters.add(name)
	defer l.waiters.remove(name, w)

	var ticket *queue.Ticket
	defer func() {
		if ticket != nil {
			// Leave the queue whatever happened; on success the row is
			// ours and the waiter entry only misleads.
			if err := ticket.Leave(ctx); err != nil {
				l.cfg.logger.Warn("rowlock: leaving the queue failed", "name", name, "error", err)
			}
		}
	}()
	p := pacer{minPoll: l.cfg.minPoll, maxPoll: l.cfg.maxPoll, maxPollUnnotified: l.cfg.maxPollUnnotified}
	listening, wasFirst := false, false
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if ticket != nil {
			a.waiterID = ticket.ID()
		}
		out, sent, err := l.try(ctx, a)
		if err != nil {
			if ctx.Err() != nil {
				return nil, errors.Join(dblock.ErrNotAcquired, ctx.Err())
			}
			return nil, err
		}
		if out.acquired {
			return l.newLock(ctx, a, o, owner, out.token, sent), nil
		}
		// Later tries of a waiter that polls for releases look before
		// they try. The owner cannot re-enter while it waits: it does not
		// hold the lock.
		a.polling = l.ln == nil
		if o.Fair && ticket == nil {
			if ticket, err = l.queue.Enqueue(ctx, name, owner); err != nil {
				if ctx.Err() != nil {
					return nil, errors.Join(dblock.ErrNotAcquired, ctx.Err())
				}
				return nil, err
			}
			l.waiters.setTicket(w, ticket)
			continue
		}
		if l.ln != nil && !listening {
			// Listen before sleeping; a release between the failed try
			// and LISTEN would be missed, so try once more right away.
			if listening = l.ln.ensure(ctx); listening {
				continue
			}
		}
		// Only the first waiter of a name in this Locker polls; the others
		// sleep until it leaves (it wakes the next) or a release wakes
		// them, so idle waiters cost the database nothing.
		pause := l.cfg.idleRecheck
		first := l.waiters.isFirst(name, w)
		if wasFirst && !first {
			// A waiter with an older place in the queue (or this one,
			// queued again at the tail) is first now: it must poll, and
			// may be asleep.
			l.waiters.wakeFirst(name)
		}
		wasFirst = first
		if first {
			remaining, notified := out.remaining, listening
			if listening {
				// Releases are announced only when asked for.
				var armed bool
				var left time.Duration
				err := lockkit.RetryContention(ctx, func() (err error) {
					armed, left, err = l.store.wantWake(ctx, name)
					return err
				})
				switch {
				case err != nil && ctx.Err() != nil:
					return nil, errors.Join(dblock.ErrNotAcquired, ctx.Err())
				case err != nil:
					l.cfg.logger.Warn("rowlock: asking for a wake-up failed; polling", "name", name, "error", err)
					notified = false
				case armed:
					remaining = left
				default:
					// Not held any more, or kept for older fair waiters:
					// no announcement will come.
					notified = false
				}
			}
			pause = p.next(remaining, notified)
		}
		if timer == nil {
			timer = time.NewTimer(pause)
		} else {
			timer.Reset(pause)
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(dblock.ErrNotAcquired, ctx.Err())
		case <-w.wake:
			p.reset()
		case <-timer.C:
		}
		if l.ln != nil && listening {
			// The listener may have stopped (lost connection); restart it.
			listening = l.ln.ensure(ctx)
		}
	}
}

func (l *Locker) prepare(ctx context.Context, name string, opts []dblock.Option) (attempt, dblock.Options, dblock.Owner, error) {
	if err := lockkit.CheckContext(ctx); err != nil {
		return attempt{}, dblock.Options{}, dblock.Owner{}, fmt.Errorf("rowlock: %w", err)
	}
	if l.closed.Load() {
		return attempt{}, dblock.Options{}, dblock.Owner{}, dblock.ErrClosed
	}
	if err := lockkit.ValidateName(name); err != nil {
		return attempt{}, dblock.Options{}, dblock.Owner{}, err
	}
	o, err := lockkit.ResolveOptions(opts...)
	if err != nil {
		return attempt{}, dblock.Options{}, dblock.Owner{}, err
	}
	owner, err := lockkit.OwnerFor(ctx)
	if err != nil {
		return attempt{}, dblock.Options{}, dblock.Owner{}, err
	}
	if err := ctx.Err(); err != nil {
		return attempt{}, dblock.Options{}, dblock.Owner{}, errors.Join(dblock.ErrNotAcquired, err)
	}
	return attempt{
		name: name, host: owner.Host, ownerID: owner.ID, note: o.Note,
		ttl: o.TTL, minHold: o.MinHold,
	}, o, owner, nil
}

func (l *Locker) try(ctx context.Context, a attempt) (outcome, time.Time, error) {
	var out outcome
	var sent time.Time
	err := lockkit.RetryContention(ctx, func() (err error) {
		sent = clock.Now()
		out, err = l.store.tryAcquire(ctx, a)
		return err
	})
	switch {
	case err == nil:
		return out, sent, nil
	case ctx.Err() != nil:
		// Whatever the statement's error (contention retried until ctx
		// ran out, a statement cut short), the caller's context ended:
		// not acquired, never the driver's contention error.
		return outcome{}, sent, errors.Join(dblock.ErrNotAcquired, ctx.Err())
	case lockkit.ClassifyError(err) == lockkit.ClassContention:
		// Contenders kept colliding: someone else is taking it.
		return outcome{}, sent, nil
	}
	return outcome{}, sent, lockkit.WrapDBError("rowlock: acquire "+fmt.Sprintf("%q", a.name), err)
}
