package rowlock

import (
	"context"
	"errors"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/queue"
)

// waiting is one Acquire call from its first try to its last: its place
// among the Locker's waiters and in the fair queue, whether releases in
// other processes reach it, and how long it sleeps between tries.
type waiting struct {
	l *Locker
	a attempt
	w *waiter
	// ticket is the place in the fair queue, nil until a fair waiter joins.
	ticket *queue.Ticket
	pacer  pacer
	// listening is true while the Locker's listener runs: a release in
	// another process wakes the first waiter.
	listening bool
	// wasFirst is true when, at the last pause, this was the waiter of the
	// name that polls.
	wasFirst bool
	timer    *time.Timer // made at the first sleep; most calls never sleep
	// armed is the hold whose release was last armed to ring for this
	// waiter (MySQL): while the holder and token stay the same, and the
	// watcher still waits on its bell, there is nothing to ask again.
	armed holderInfo
	// retried is true when the last pause was none: the hold the try
	// before it met had ended by the time it was to be armed.
	retried bool
	// counted is true once an unfair waiter is counted among the waiters
	// (the metric; the queue counts fair ones).
	counted bool
	// cutShort is true when the wait ended in a try whose statements
	// failed, so that whether they took the lock is not known.
	cutShort bool
}

// startWaiting enters a among the Locker's waiters; end takes it out.
func (l *Locker) startWaiting(a attempt) waiting {
	return waiting{
		l: l,
		a: a,
		w: l.waiters.add(a.name),
		pacer: pacer{
			minPoll:           l.cfg.minPoll,
			maxPoll:           l.cfg.maxPoll,
			maxPollUnnotified: l.cfg.maxPollUnnotified,
		},
	}
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
		wt.a.sessionKey = wt.l.sess.key(ctx)
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
		// Later tries of a waiter that polls for releases look before
		// they try. The owner cannot re-enter while it waits: it does not
		// hold the lock.
		tryNow, err := wt.beforeSleep(ctx)
		if err != nil {
			return nil, cutShort(ctx, err)
		}
		wt.a.polling = !wt.listening
		if tryNow {
			continue
		}
		pause, err := wt.pause(ctx, out.holder)
		if err != nil {
			return nil, err
		}
		if err := wt.sleep(ctx, pause); err != nil {
			return nil, err
		}
	}
}

// beforeSleep readies the waiter to sleep after a failed try: a fair
// waiter joins the queue, and in a Locker that listens the listener is
// started. tryNow is true when the next try must not wait: the first try
// that carries the waiter's place in the queue, or the first once the
// listener listens, since a release between the failed try and LISTEN was
// announced to nobody.
func (wt *waiting) beforeSleep(ctx context.Context) (tryNow bool, err error) {
	if wt.a.fair && wt.ticket == nil {
		ticket, err := wt.l.queue.Enqueue(ctx, wt.a.name, wt.a.owner(), wt.a.sessionKey)
		if err != nil {
			return false, err
		}
		wt.ticket = ticket
		wt.l.waiters.setTicket(wt.w, ticket)
		return true, nil
	}
	if !wt.a.fair && !wt.counted {
		wt.counted = true
		wt.l.metrics.Waiting(context.WithoutCancel(ctx), false, 1)
	}
	if wt.l.sess.listen && !wt.listening {
		wt.listening = wt.l.sess.listening(ctx)
		return wt.listening, nil
	}
	return false, nil
}

// pause is how long to sleep after a failed try that found h, the holder
// (if known). Only the first waiter of a name in this Locker polls; the
// others sleep until it leaves (it wakes the next) or a release wakes them,
// so idle waiters cost the database nothing. The first also has the
// Locker's watcher check that the holder it waits for, or the fair waiter
// it queues behind, is alive.
func (wt *waiting) pause(ctx context.Context, h holderInfo) (time.Duration, error) {
	first := wt.l.waiters.isFirst(wt.a.name, wt.w)
	if wt.wasFirst && !first {
		// A waiter with an older place in the queue (or this one, queued
		// again at the tail) is first now: it must poll, and may be
		// asleep.
		wt.l.waiters.wakeFirst(wt.a.name)
	}
	wt.wasFirst = first
	if !first {
		return wt.l.cfg.idleRecheck, nil
	}
	notified := wt.listening
	switch {
	case wt.armed.rings && h.key == wt.armed.key && h.token == wt.armed.token:
		h.rings, h.bell = true, wt.armed.bell
	case wt.listening || (wt.l.sess.ringing() && h.key != 0 && h.remaining > 0):
		var ended bool
		var err error
		if h, notified, ended, err = wt.askWake(ctx, h); err != nil {
			return 0, err
		}
		if ended && !wt.retried {
			// The hold the try met ended before it could be armed
			// (released, lapsed, or taken over): no announcement of its
			// end will come, and the lock may be free. Try again at once,
			// but only once in a row: a lapsed lock kept for an older
			// fair waiter looks the same, and would have this spin.
			wt.retried = true
			return 0, nil
		}
	}
	wt.retried = false
	wt.armed = holderInfo{}
	if watched := wt.watchBlocker(ctx, h); h.rings {
		// MySQL: the holder's bell wakes this waiter if the watcher
		// waits on it.
		notified = watched
		if watched {
			wt.armed = h
		}
	}
	return wt.pacer.next(h.remaining, notified), nil
}

// watchBlocker has the watcher check whoever keeps the lock from this
// waiter: the holder whose release was armed to ring its bell (MySQL), or
// the holder if its lease has time left, or else the oldest older fair
// waiter with a session marker. Without crash detection it does nothing
// but the first. It reports whether the watcher waits on a bell for this
// waiter.
func (wt *waiting) watchBlocker(ctx context.Context, h holderInfo) bool {
	if h.rings && wt.l.watch.watch(wt.a.name, target{key: h.key, token: h.token, rings: true, bell: h.bell, by: wt.w}) {
		return true
	}
	// Not on the bell (a generation already seen rung: a ring whose
	// record is on its way, or the bells of a dying session freed before
	// its marker, which only the marker tells): the holder's marker is
	// still watched, or a dead holder would keep the lock for its lease
	// (found by the model: model/mutants/doorbell_stale_polls.pml).
	if wt.l.cfg.crashGrace <= 0 {
		return false
	}
	if h.remaining > wt.l.cfg.crashGrace {
		wt.l.watch.watch(wt.a.name, target{key: h.key, token: h.token, by: wt.w})
		return false
	}
	if h.remaining > 0 {
		return false // lapses soon anyway
	}
	id, key, found, err := wt.l.queue.Blocker(ctx, wt.a.name, wt.a.queueID())
	if err != nil || !found {
		return false // a failed look costs nothing but speed: the next pause looks again
	}
	wt.l.watch.watch(wt.a.name, target{key: key, id: id, by: wt.w})
	return false
}

// askWake asks that the holder's release be announced: releases are
// announced only when asked for. It returns the holder (h, unless the
// database said), whether the release will wake this waiter, and whether
// there was no live hold to ask it of (ended: the database's holder).
func (wt *waiting) askWake(ctx context.Context, h holderInfo) (now holderInfo, armed, ended bool, err error) {
	err = lockkit.RetryContention(ctx, func() (err error) {
		armed, now, err = wt.l.store.wantWake(ctx, wt.a.name, h)
		return err
	})
	switch {
	case errors.Is(err, errHoldEnded):
		return now, false, true, nil
	case err != nil && ctx.Err() != nil:
		return holderInfo{}, false, false, errors.Join(dblock.ErrNotAcquired, ctx.Err())
	case err != nil:
		wt.l.cfg.logger.Warn("rowlock: asking for a wake-up failed; polling", "name", wt.a.name, "error", err)
		return h, false, false, nil
	case armed:
		return now, true, false, nil
	}
	// The holder's session does not ring: no announcement will come.
	return h, false, false, nil
}

// sleep waits for pause to pass, a wake-up, or ctx to end.
func (wt *waiting) sleep(ctx context.Context, pause time.Duration) error {
	if wt.timer == nil {
		wt.timer = time.NewTimer(pause)
	} else {
		wt.timer.Reset(pause)
	}
	select {
	case <-ctx.Done():
		return errors.Join(dblock.ErrNotAcquired, ctx.Err())
	case <-wt.w.wake:
		wt.pacer.reset()
		if wt.armed.rings {
			// A ring (or a release in this process): the lock is likely
			// free, and the try need not look first.
			wt.a.polling = false
		}
	case <-wt.timer.C:
	}
	if wt.listening {
		// The session may have stopped (lost connection); restart it.
		wt.listening = wt.l.sess.listening(ctx)
	}
	return nil
}

// end takes the waiter out of the fair queue and off the Locker's list,
// whatever the outcome: on success the row is ours and the queue entry
// only misleads.
func (wt *waiting) end(ctx context.Context) {
	if wt.timer != nil {
		wt.timer.Stop()
	}
	if wt.ticket != nil {
		if err := wt.ticket.Leave(ctx); err != nil {
			wt.l.cfg.logger.Warn("rowlock: leaving the queue failed", "name", wt.a.name, "error", err)
		}
	}
	if wt.counted {
		wt.l.metrics.Waiting(context.WithoutCancel(ctx), false, -1)
	}
	wt.l.watch.forget(wt.a.name, wt.w)
	wt.l.waiters.remove(wt.a.name, wt.w)
}
