package rowlock

import (
	"context"
	"strconv"

	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/metrics"
)

// queueName is the name under which a fair semaphore's waiters queue: not
// the semaphore's own, which a plain lock's fair waiters may use.
func queueName(name string) string { return name + kindSeparator + "q" }

// ahead counts the live fair waiters ahead of this acquisition in the
// semaphore's line: all of them before it has joined.
func (t *semTry) ahead(ctx context.Context) (int, error) {
	ws, err := t.s.l.queue.Waiters(ctx, queueName(t.name))
	if err != nil {
		return 0, cutShort(ctx, lockkit.WrapDBError("rowlock: semaphore "+strconv.Quote(t.name), err))
	}
	if t.ticket == nil {
		return len(ws), nil
	}
	id, n := t.ticket.ID(), 0
	for _, w := range ws {
		if w.ID < id {
			n++
		}
	}
	return n, nil
}

// joinQueue puts the acquisition at the end of the semaphore's line,
// where it stays, heartbeating, until leaveQueue.
func (t *semTry) joinQueue(ctx context.Context) error {
	l := t.s.l
	ticket, err := l.queue.EnqueueAs(ctx, queueName(t.name), t.owner, l.sess.Key(ctx), metrics.TypeSemaphore)
	if err != nil {
		return cutShort(ctx, err)
	}
	t.ticket = ticket
	return nil
}

// leaveQueue takes the acquisition out of the line, if it joined, even
// when ctx has ended; a place it fails to give up lapses with its
// heartbeat.
func (t *semTry) leaveQueue(ctx context.Context) {
	if t.ticket == nil {
		return
	}
	if err := t.ticket.Leave(context.WithoutCancel(ctx)); err != nil {
		t.s.l.cfg.logger.Warn("rowlock: leaving a semaphore's line failed; the place lapses with its heartbeat",
			"name", t.name, "error", err)
	}
	t.ticket = nil
}
