package queue

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/queue"
)

// DefaultWaiterTTL is how long a waiter stays in the queue without a
// heartbeat; a dead waiter holds up the queue for at most this long.
const DefaultWaiterTTL = queue.DefaultWaiterTTL

// MinWaiterTTL is the shortest waiter TTL accepted.
const MinWaiterTTL = queue.MinWaiterTTL

// Option configures a Queue.
type Option func(*settings)

// settings are the options given to New, for the queue they configure.
type settings struct{ opts []queue.Option }

// WithDialect sets the SQL dialect. Default: detected from db's driver, as
// rowlock.New does.
func WithDialect(d dblock.Dialect) Option {
	return func(s *settings) { s.opts = append(s.opts, queue.WithDialect(d)) }
}

// WithWaiterTTL sets how long a waiter without heartbeat stays in the
// queue. Default DefaultWaiterTTL, at least MinWaiterTTL.
func WithWaiterTTL(d time.Duration) Option {
	return func(s *settings) { s.opts = append(s.opts, queue.WithWaiterTTL(d)) }
}

// WithLogger sets where heartbeat failures are logged. Default: records at
// Warn and above go to slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(s *settings) { s.opts = append(s.opts, queue.WithLogger(l)) }
}

// WithMeterProvider sets where the queue's metrics go: its fair waiters
// (sqllock.lock.waiters with sqllock.lock.fair=true). Default: the global
// OpenTelemetry meter provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(s *settings) { s.opts = append(s.opts, queue.WithMeterProvider(mp)) }
}

// Queue is the waiter table of one database: it enqueues waiters and
// heartbeats them, and lists and deletes them. Safe for concurrent use.
type Queue struct{ q *queue.Queue }

// Ticket is one waiter's place in the queue.
type Ticket struct{ t *queue.Ticket }

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
	var s settings
	for _, opt := range opts {
		if opt != nil {
			opt(&s)
		}
	}
	q, err := queue.New(db, s.opts...)
	if err != nil {
		return nil, err
	}
	return &Queue{q: q}, nil
}

// TTL is how long a waiter stays queued without a heartbeat.
func (q *Queue) TTL() time.Duration { return q.q.TTL() }

// Enqueue puts a waiter for name at the tail of the queue and keeps it
// alive (a heartbeat every TTL/3) until Leave. This is what Acquire with
// dblock.Fair does before it waits; a lock gives way to the head of its
// queue only if it is rowlock's. key is the waiter's session marker, 0
// for none. Contention is retried until ctx ends; then the error wraps
// ctx.Err(). If ctx ends while the row is being inserted, Enqueue waits
// for the insert to finish (a few seconds at most) and deletes the row, so
// that no waiter stays queued that nobody will leave.
func (q *Queue) Enqueue(ctx context.Context, name string, owner dblock.Owner, key int64) (*Ticket, error) {
	t, err := q.q.Enqueue(ctx, name, owner, key)
	if err != nil {
		return nil, err
	}
	return &Ticket{t: t}, nil
}

// Waiters returns name's live waiters in queue order, the head first.
// Errors: dblock.ErrInvalidName, dblock.ErrSchemaMissing, or a driver error.
func (q *Queue) Waiters(ctx context.Context, name string) ([]Waiter, error) {
	return waiters(q.q.Waiters(ctx, name))
}

// AllWaiters returns the live waiters of every name, ordered by name and
// then queue order, at most limit (at least 1) of them. Position counts
// within each name's queue. It is for people and tools that look (sqllock
// status), not for a hot path.
// Errors: dblock.ErrInvalidOption, dblock.ErrSchemaMissing, or a driver
// error.
func (q *Queue) AllWaiters(ctx context.Context, limit int) ([]Waiter, error) {
	return waiters(q.q.AllWaiters(ctx, limit))
}

// CountDead counts the waiters whose heartbeat has lapsed, by the database
// clock: what DeleteDead with no grace would delete.
func (q *Queue) CountDead(ctx context.Context) (int, error) { return q.q.CountDead(ctx) }

// DeleteDead deletes at most limit (1 to 10000) waiters whose heartbeat
// lapsed more than grace ago by the database clock, oldest first, and says
// how many; a batch that comes back short has deleted all there were. A
// dead waiter (its process or connection died) holds up its queue only
// until its heartbeat lapses, but its row stays until deleted: package
// reaper calls this. A waiter heartbeating at that moment is kept.
// Contention is retried a few times.
// Errors: dblock.ErrInvalidOption, dblock.ErrSchemaMissing, or a driver
// error.
func (q *Queue) DeleteDead(ctx context.Context, grace time.Duration, limit int) (int, error) {
	return q.q.DeleteDead(ctx, grace, limit)
}

// Close stops heartbeating; waiters still queued lapse after one TTL
// unless they Leave first, which still deletes their rows. A later
// Enqueue heartbeats again. It does not close the *sql.DB.
func (q *Queue) Close() { q.q.Close() }

// ID is the waiter's row id; ids order the queue. It changes if the waiter
// had lapsed (a heartbeat failed for a whole TTL) and had to enqueue again.
func (t *Ticket) ID() int64 { return t.t.ID() }

// Position is t's place in its name's queue, 1 for the head, as Waiters
// counts it; 0 once t has left or its place has lapsed. It reads the
// name's queue: for people and tools that look, not for a hot path.
// Errors: as Waiters'.
func (t *Ticket) Position(ctx context.Context) (int, error) { return t.t.Position(ctx) }

// Leave removes the waiter from the queue. It uses its own short timeout
// when ctx is already done, so a canceled wait still leaves at once.
// Contention is retried until that context ends; if it does, the error
// wraps its ctx.Err() and the row lapses after one TTL without heartbeat.
func (t *Ticket) Leave(ctx context.Context) error { return t.t.Leave(ctx) }

func waiters(in []queue.Waiter, err error) ([]Waiter, error) {
	if err != nil {
		return nil, err
	}
	out := make([]Waiter, len(in))
	for i, w := range in {
		out[i] = Waiter(w)
	}
	return out, nil
}
