package queue

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/logging"
	"github.com/sqllock/sqllock/internal/metrics"
	"github.com/sqllock/sqllock/internal/pgxrow"
)

// Table is the waiter table.
const Table = "dblock_waiters"

// locksTable is rowlock's lock table, whose queued flag a MySQL waiter sets
// (see mysqlStore.insert).
const locksTable = "dblock_locks"

// DefaultWaiterTTL is how long a waiter stays in the queue without a
// heartbeat; a dead waiter holds up the queue for at most this long.
const DefaultWaiterTTL = 10 * time.Second

// MinWaiterTTL is the shortest waiter TTL accepted.
const MinWaiterTTL = 100 * time.Millisecond

// Option configures a Queue.
type Option func(*Queue)

// WithDialect sets the SQL dialect. Default: detected from db's driver, as
// rowlock.New does.
func WithDialect(d dblock.Dialect) Option { return func(q *Queue) { q.dialect = d } }

// WithWaiterTTL sets how long a waiter without heartbeat stays in the
// queue. Default DefaultWaiterTTL, at least MinWaiterTTL.
func WithWaiterTTL(d time.Duration) Option { return func(q *Queue) { q.ttl = d } }

// WithLogger sets where heartbeat failures are logged. Default: records at
// Warn and above go to slog.Default(); rowlock passes its Locker's logger.
func WithLogger(l *slog.Logger) Option { return func(q *Queue) { q.log = l } }

// WithMeterProvider sets where the queue's metrics go: the fair waiters of
// this Queue (sqllock.lock.waiters with sqllock.lock.fair=true). Default:
// the global OpenTelemetry meter provider; rowlock passes its Locker's.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(q *Queue) { q.meters = mp } }

// Queue is the waiter table of one database: it enqueues waiters and
// heartbeats them, and lists and deletes them. Safe for concurrent use.
type Queue struct {
	dialect dblock.Dialect
	store   store
	ttl     time.Duration
	log     *slog.Logger
	meters  metric.MeterProvider
	metrics *metrics.Instruments

	mu      sync.Mutex
	tickets map[*Ticket]struct{}
	stop    context.CancelFunc // stops the heartbeat loop; nil when idle
	done    chan struct{}
}

// Ticket is one waiter's place in the queue.
type Ticket struct {
	q     *Queue
	name  string
	owner dblock.Owner
	key   int64 // session marker
	// metrics counts the waiter, as a waiter of its lock type.
	metrics *metrics.Instruments

	// id is read without mu (ID), so that callers ordering waiters by it
	// never wait for a re-enqueue in flight; it is written under mu.
	id   atomic.Int64
	mu   sync.Mutex
	left bool // set by Leave; a heartbeat must not queue it again
}

// Waiter is a live waiter, as Waiters and AllWaiters list it.
type Waiter struct {
	// Position is the waiter's place in its name's queue; 1 is the head.
	Position int
	// ID is the waiter's row id; ids order the queue.
	ID        int64
	Name      string
	OwnerHost string
	OwnerID   string
	Waited    time.Duration // since it enqueued, by the database clock
	ExpiresIn time.Duration // until its heartbeat lapses
}

// New returns a Queue on db, whose tables must have been created with
// migrations.Up. It does no I/O and never closes db. Errors:
// dblock.ErrInvalidDB, dblock.ErrUnknownDialect, dblock.ErrInvalidOption.
func New(db *sql.DB, opts ...Option) (*Queue, error) {
	if db == nil {
		return nil, fmt.Errorf("queue: %w: nil *sql.DB", dblock.ErrInvalidDB)
	}
	q := &Queue{ttl: DefaultWaiterTTL, log: logging.Default(), meters: metrics.Default(), tickets: map[*Ticket]struct{}{}}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("queue: %w", &dblock.OptionError{Option: "Option", Reason: "nil option"})
		}
		opt(q)
	}
	d, err := lockkit.ResolveDialect(db, q.dialect)
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	q.dialect = d
	var s store
	switch d {
	case dblock.Postgres:
		r := pgxrow.Wrap(db)
		s = postgresStore{common{r, pgCommon}, r}
	case dblock.MySQL:
		s = mysqlStore{common{db, myCommon}, db}
	case dblock.SQLite:
		s = sqliteStore{common{db, sqCommon}, db}
	default:
		return nil, fmt.Errorf("queue: %w: %q", dblock.ErrUnknownDialect, d)
	}
	q.store = s
	switch {
	case q.ttl < MinWaiterTTL:
		return nil, fmt.Errorf("queue: %w", &dblock.OptionError{Option: "WithWaiterTTL", Reason: "must be at least " + MinWaiterTTL.String()})
	case q.log == nil:
		return nil, fmt.Errorf("queue: %w", &dblock.OptionError{Option: "WithLogger", Reason: "nil logger"})
	case q.meters == nil:
		return nil, fmt.Errorf("queue: %w", &dblock.OptionError{Option: "WithMeterProvider", Reason: "nil MeterProvider"})
	}
	if q.metrics, err = metrics.New(q.meters, "rowlock"); err != nil {
		return nil, fmt.Errorf("queue: %w", &dblock.OptionError{Option: "WithMeterProvider", Reason: err.Error()})
	}
	return q, nil
}

// TTL is the waiter TTL.
func (q *Queue) TTL() time.Duration { return q.ttl }

// Enqueue puts a waiter for name at the tail of the queue and keeps it alive
// until Leave. key is the waiter's session marker (0 for none): once no
// session holds it, others may pass the waiter over (Shorten). Contention
// is retried until ctx ends; then the error wraps ctx.Err(). If ctx ends
// while the insert runs, Enqueue waits for it (at most settleTimeout more)
// and deletes the row, so that no waiter is left queued that nobody leaves.
func (q *Queue) Enqueue(ctx context.Context, name string, owner dblock.Owner, key int64) (*Ticket, error) {
	return q.EnqueueAs(ctx, name, owner, key, metrics.TypeMutex)
}

// EnqueueAs is Enqueue for a waiter of a lock of type typ, which the
// waiters' metric carries (a fair semaphore's waiters queue too).
func (q *Queue) EnqueueAs(ctx context.Context, name string, owner dblock.Owner, key int64, typ metrics.LockType) (*Ticket, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	if err := lockinput.ValidateName(name); err != nil {
		return nil, err
	}
	t := &Ticket{q: q, name: name, owner: owner, key: key, metrics: q.metrics.As(typ)}
	// The insert does not end with ctx: once sent, its outcome must be
	// known. A cancel that cut its reply off would leave a row that nobody
	// leaves or heartbeats, whose session marker is live: every later
	// waiter would stand behind it for a whole TTL. So it runs under
	// settling(ctx), and its row is deleted if ctx ended meanwhile
	// (TestEnqueueCanceledInFlight).
	ictx, cancel := settling(ctx)
	defer cancel()
	var id int64
	err := lockkit.RetryContentionUntilDone(ctx, func() (err error) {
		id, err = q.store.insert(ictx, name, owner, q.ttl, key)
		return err
	})
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
		if lerr := q.store.leave(ictx, id); lerr != nil {
			err = fmt.Errorf("%w (and deleting the waiter it queued failed, so it lapses after a TTL: %v)", err, lerr)
		}
	}
	if err != nil {
		return nil, lockkit.WrapDBError("queue: enqueue", err)
	}
	t.id.Store(id)
	t.metrics.Waiting(ctx, true, 1)
	q.mu.Lock()
	q.tickets[t] = struct{}{}
	if q.stop == nil {
		loopCtx, stop := context.WithCancel(context.Background())
		q.stop, q.done = stop, make(chan struct{})
		go q.heartbeat(loopCtx, q.done)
	}
	q.mu.Unlock()
	return t, nil
}

// ID is the waiter's row id; ids order the queue. It changes if the waiter
// had lapsed (a heartbeat failed for a whole TTL) and had to enqueue again.
func (t *Ticket) ID() int64 { return t.id.Load() }

// Leave removes the waiter from the queue. It uses its own short timeout
// when ctx is already done, so a canceled Acquire still leaves at once.
// Contention is retried until that context ends; if it does, the error
// wraps its ctx.Err() and the row lapses after one TTL without heartbeat.
func (t *Ticket) Leave(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background() // leaving must not fail: the row would linger
	}
	// Marking the ticket first orders Leave with a concurrent re-enqueue by
	// the heartbeat (under t.mu): either that sees left and does nothing,
	// or Leave below deletes the row it made.
	t.mu.Lock()
	t.left = true
	t.mu.Unlock()
	q := t.q
	q.mu.Lock()
	_, queued := q.tickets[t]
	delete(q.tickets, t)
	var stop context.CancelFunc
	var done chan struct{}
	if len(q.tickets) == 0 && q.stop != nil {
		stop, done = q.stop, q.done
		q.stop, q.done = nil, nil
	}
	q.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	if !queued {
		return nil
	}
	t.metrics.Waiting(ctx, true, -1)
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
	}
	// Deadlocks and lock waits with concurrent tries (MySQL's locking reads
	// of this table) must not leave a waiter behind: retry them.
	err := lockkit.RetryContentionUntilDone(ctx, func() error {
		return q.store.leave(ctx, t.ID())
	})
	if err != nil {
		return lockkit.WrapDBError("queue: leave", err)
	}
	return nil
}

// Close stops heartbeating; waiters still queued lapse after one TTL
// unless they Leave first, which still deletes their rows (the tickets stay
// known for that). A later Enqueue heartbeats again.
func (q *Queue) Close() {
	q.mu.Lock()
	stop, done := q.stop, q.done
	q.stop, q.done = nil, nil
	q.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// heartbeat pushes every queued waiter's expiry forward every TTL/3 with one
// statement, and re-enqueues waiters whose rows vanished.
func (q *Queue) heartbeat(ctx context.Context, done chan struct{}) {
	defer close(done)
	ticker := time.NewTicker(q.ttl / 3)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		q.beat(ctx)
	}
}

// beat is one heartbeat of every queued waiter.
func (q *Queue) beat(ctx context.Context) {
	q.mu.Lock()
	tickets := make([]*Ticket, 0, len(q.tickets))
	for t := range q.tickets {
		tickets = append(tickets, t)
	}
	q.mu.Unlock()
	if len(tickets) == 0 {
		return
	}
	ids := make([]int64, len(tickets))
	for i, t := range tickets {
		ids[i] = t.ID()
	}
	// Contention is retried until the next beat is due.
	beatCtx, cancel := context.WithTimeout(ctx, q.ttl/3)
	var alive map[int64]struct{}
	err := lockkit.RetryContentionUntilDone(beatCtx, func() (err error) {
		alive, err = q.store.beat(beatCtx, ids, q.ttl)
		return err
	})
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			q.log.Warn("queue: heartbeat failed", "error", err)
		}
		return
	}
	for i, t := range tickets {
		if _, ok := alive[ids[i]]; !ok {
			q.requeue(ctx, t)
		}
	}
}

// requeue queues t again at the tail when its row is gone: reaped as dead
// (we could not heartbeat for a whole TTL), so it queues again rather than
// vanish; unless it just left, and must stay gone.
// Rekey makes key the waiter's session marker, in its row and in a row
// it is queued again under: its Locker's session connection changed, and
// the old marker is gone for good, so others would cut its place short
// (Shorten) again and again.
func (t *Ticket) Rekey(ctx context.Context, key int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.left || t.key == key {
		return nil
	}
	err := lockkit.RetryContentionUntilDone(ctx, func() error {
		return t.q.store.rekey(ctx, t.id.Load(), key)
	})
	if err != nil {
		return err
	}
	t.key = key
	return nil
}

func (q *Queue) requeue(ctx context.Context, t *Ticket) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.left {
		return
	}
	insertCtx, cancel := context.WithTimeout(ctx, q.ttl/3)
	defer cancel()
	var id int64
	err := lockkit.RetryContentionUntilDone(insertCtx, func() (err error) {
		id, err = q.store.insert(insertCtx, t.name, t.owner, q.ttl, t.key)
		return err
	})
	if err != nil {
		q.log.Warn("queue: re-enqueue failed", "name", t.name, "error", err)
		return
	}
	t.id.Store(id)
}

// Blocker returns the oldest live waiter of name older than id (the
// largest int64 for a caller with no place) that has a session marker, and
// that key; found is false when there is none.
func (q *Queue) Blocker(ctx context.Context, name string, id int64) (blockerID, key int64, found bool, err error) {
	return q.store.blocker(ctx, name, id)
}

// Shorten ends waiter id's place at most grace from now, by the database
// clock, if its session marker is still key: the caller found that no
// session holds the marker any more, so the waiter's process is gone (or
// its session is, and a live one keeps its place only while its heartbeat
// pushes the expiry on). ok is false when the row is gone or has another
// marker.
func (q *Queue) Shorten(ctx context.Context, id, key int64, grace time.Duration) (ok bool, err error) {
	return q.store.shorten(ctx, id, key, grace)
}
