package rowlock

import (
	"context"

	"github.com/sqllock/sqllock/internal/queue"
)

// waiting is one Acquire call from its first try to its last: its place
// in the fair queue, and its waiter (waiter.go), which it shares with
// every kind of lock.
type waiting struct {
	l *Locker
	a attempt
	w waiter
	// ticket is the place in the fair queue, nil until a fair waiter joins.
	ticket *queue.Ticket
	// counted is true once an unfair waiter is counted among the waiters
	// (the metric; the queue counts fair ones).
	counted bool
	// cutShort is true when the wait ended in a try whose statements
	// failed, so that whether they took the lock is not known.
	cutShort bool
}

// startWaiting enters a among the Locker's waiters; end takes it out. It
// returns a value, which stays on the caller's stack.
func (l *Locker) startWaiting(a attempt) waiting {
	wt := waiting{l: l, a: a}
	l.initWaiter(&wt.w, []string{a.name})
	wt.w.queued = true
	return wt
}

// run tries until a try takes the lock, fails, or ctx ends, sleeping
// between tries.
func (wt *waiting) run(ctx context.Context) (*Lock, error) {
	for {
		if wt.ticket != nil {
			// Read at every try: a waiter whose place lapsed is queued
			// again, under a new id.
			wt.a.waiterID = wt.ticket.ID()
		}
		// Read at every try too: the session may have restarted, under
		// a new marker, while this waited; the queue's row must then
		// carry the new one, or others would keep cutting its place short.
		wt.a.sessionKey = wt.l.sess.Key(ctx)
		if wt.ticket != nil && wt.a.sessionKey != 0 {
			if err := wt.ticket.Rekey(ctx, wt.a.sessionKey); err != nil && ctx.Err() == nil {
				// Only its place is at stake: the next try rekeys again.
				wt.l.cfg.logger.Warn("rowlock: recording a fair waiter's new session marker failed", "name", wt.a.name, "error", err)
			}
		}
		out, sent, err := wt.l.try(ctx, wt.a)
		if err != nil {
			wt.cutShort = true
			return nil, cutShort(ctx, err)
		}
		if out.acquired {
			if k := wt.l.won(ctx, wt.a, out.token, sent); k != nil {
				return k, nil
			}
			continue // answered too late, and given back: try again
		}
		tryNow, err := wt.beforeSleep(ctx)
		if err != nil {
			return nil, cutShort(ctx, err)
		}
		wt.a.polling = !wt.w.Listening
		if tryNow {
			continue
		}
		wt.w.queueID = wt.a.queueID()
		woken, err := wt.w.wait(ctx, []blocker{{name: wt.a.name, h: out.holder}})
		if err != nil {
			return nil, err
		}
		// Later tries of a waiter that polls for releases look before
		// they try, unless a ring woke it: the lock is likely free then.
		// The owner cannot re-enter while it waits: it does not hold the
		// lock.
		wt.a.polling = !wt.w.Listening && !(woken && wt.w.rings())
	}
}

// beforeSleep readies the waiter to sleep after a failed try: a fair
// waiter joins the queue, and then tries again at once (tryNow), so that
// its next try carries its place; an unfair one is counted.
func (wt *waiting) beforeSleep(ctx context.Context) (tryNow bool, err error) {
	if wt.a.fair && wt.ticket == nil {
		ticket, err := wt.l.queue.Enqueue(ctx, wt.a.name, wt.a.owner(), wt.a.sessionKey)
		if err != nil {
			return false, err
		}
		wt.ticket = ticket
		wt.l.waiters.SetPlace(wt.w.W, ticket)
		return true, nil
	}
	if !wt.a.fair && !wt.counted {
		wt.counted = true
		wt.l.metrics.Waiting(context.WithoutCancel(ctx), false, 1)
	}
	return false, nil
}

// end takes the waiter out of the fair queue and off the Locker's list,
// whatever the outcome: on success the row is ours and the queue entry
// only misleads.
func (wt *waiting) end(ctx context.Context) {
	if wt.ticket != nil {
		if err := wt.ticket.Leave(ctx); err != nil {
			wt.l.cfg.logger.Warn("rowlock: leaving the queue failed", "name", wt.a.name, "error", err)
		}
	}
	if wt.counted {
		wt.l.metrics.Waiting(context.WithoutCancel(ctx), false, -1)
	}
	wt.w.end()
}
