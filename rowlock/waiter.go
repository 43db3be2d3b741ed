package rowlock

import (
	"context"
	"time"

	"github.com/sqllock/sqllock/internal/wake"
)

// waiter is one caller's wait for a change among rows of the lock table:
// the row of Acquire's name, any slot of a semaphore, a read/write lock's
// writer or its readers. Acquire and every kind wait through it. It is on
// the Locker's wake.List under each of its names, so a release of any of
// them by this Locker wakes it, as does another Locker's release when it
// asked for one: a NOTIFY on PostgreSQL, the holder's doorbell on MySQL
// (internal/wake/bell.go). It has the watcher watch the session markers
// of the holders it waits for. Only the first waiter of its names in the
// Locker polls and asks; the others sleep until it leaves (it wakes the
// next) or a release of their Locker wakes them, so idle waiters cost the
// database nothing.
type waiter struct {
	l     *Locker
	names []string
	wake.Sleeper
	// asked are, by name, the holds whose release was asked to be
	// announced (with the bell to wait on, on MySQL): while the row's
	// holder and token stay the same there is nothing to ask again.
	asked map[string]holderInfo
	// wasFirst is true when, at the last pause, this was the waiter that
	// polls.
	wasFirst bool
	// retried is true when the last pause was none for a blocker found
	// lapsed (see ask).
	retried bool
	// queued is set for a wait of one name whose lapsed row may be kept
	// for an older fair waiter (Acquire): the watcher then watches that
	// waiter, whose place in the queue after queueID it looks up. Data,
	// not a callback: a callback into Acquire's waiting would move every
	// blocked Acquire's state to the heap (about 300 B each).
	queued  bool
	queueID int64
}

// blocker is a row in a waiter's way, and its holder as last seen: the
// lease left, the session marker, the token.
type blocker struct {
	name string
	h    holderInfo
}

// newWaiter puts a waiter on names; end takes it off.
func (l *Locker) newWaiter(names []string) *waiter {
	w := new(waiter)
	l.initWaiter(w, names)
	return w
}

// initWaiter puts w, a zero waiter, on names: for a waiter that lives
// inside another value (Acquire's waiting), which saves an allocation per
// blocked Acquire.
func (l *Locker) initWaiter(w *waiter, names []string) {
	ww := wake.NewWaiter()
	l.waiters.AddUnder(names, ww)
	p := l.cfg.pacing
	*w = waiter{l: l, names: names, Sleeper: wake.Sleeper{W: ww,
		Pacer: wake.Pacer{MinPoll: p.minPoll, MaxPoll: p.maxPoll, MaxPollUnnotified: p.maxPollUnnotified}}}
}

// wait sleeps after a look that found blockers in the way, until one of
// them may have changed or ctx ends (the error then joins
// dblock.ErrNotAcquired and ctx.Err()). woken reports a wake-up, rather
// than a pause that ran out.
func (w *waiter) wait(ctx context.Context, blockers []blocker) (woken bool, err error) {
	pause, err := w.pause(ctx, blockers)
	if err != nil {
		return false, cutShort(ctx, err)
	}
	if pause <= 0 {
		return false, nil
	}
	return w.Sleep(ctx, pause, w.l.sess.Listening)
}

// pause is how long to sleep: until woken, for a waiter that is not the
// first of any of its names in the Locker; for the first, until a
// blocker's lease lapses or a release is announced, or the next poll. It
// is 0 when the waiter must look again at once.
func (w *waiter) pause(ctx context.Context, blockers []blocker) (time.Duration, error) {
	first := w.l.waiters.FirstOfAny(w.names, w.W)
	if w.wasFirst && !first {
		// A waiter with an older place in the queue is first now: it
		// must poll, and may be asleep.
		for _, name := range w.names {
			w.l.waiters.WakeFirst(name)
		}
	}
	w.wasFirst = first
	if !first {
		return w.l.cfg.pacing.idleRecheck, nil
	}
	if w.l.sess.WantsListen() && !w.Listening {
		if w.Listening = w.l.sess.Listening(ctx); w.Listening {
			// A release between the look and LISTEN was announced to
			// nobody: look again now.
			return 0, nil
		}
	}
	notified, again, err := w.ask(ctx, blockers)
	if err != nil || again {
		return 0, err
	}
	w.retried = false
	return w.Pacer.Next(w.watch(ctx, blockers), notified), nil
}

// ask asks that the release of each blocker wake the waiter (NOTIFY; a
// doorbell), unless asked already of that very hold. notified is true
// when every blocker's release will wake the waiter. again is true when
// a blocker's hold ended since the look (released, lapsed, or taken
// over): no announcement of its end will come, and the row may be free,
// so the waiter looks again at once. It does so every time for a hold
// that was live at the look (each time, a holder came and went
// meanwhile, so others make progress), but only once in a row for one
// found lapsed: a lapsed lock kept for an older fair waiter looks the
// same, and would have it spin. (Once was always, before: a waiter that
// met two short holds in a row slept a whole poll interval with the lock
// free; TestWokenAcrossProcesses, whose waiters never poll, hung on it.)
func (w *waiter) ask(ctx context.Context, blockers []blocker) (notified, again bool, err error) {
	ringing := !w.Listening && w.l.sess.Ringing()
	if !w.Listening && !ringing {
		return false, false, nil // polling: nothing to ask
	}
	notified = true
	for i := range blockers {
		wakes, again, err := w.askOne(ctx, &blockers[i], ringing)
		if err != nil || again {
			return false, again, err
		}
		notified = notified && wakes
	}
	return notified, false, nil
}

// askOne is ask for blocker b, which it updates to the hold asked about;
// ringing is true on MySQL with doorbells. wakes is true when b's release
// will wake the waiter. err is set only when ctx ended.
//
// Its complexity (over 15) is the cases of one hold (no bell, asked
// already, ended, not armed, armed, its bell declined), each with its
// retry rule; apart, those rules would drift.
func (w *waiter) askOne(ctx context.Context, b *blocker, ringing bool) (wakes, again bool, err error) {
	live := b.h.remaining > 0
	if ringing && (b.h.key == 0 || !live) {
		delete(w.asked, b.name)
		if b.h.token != 0 && !live && !w.retried {
			// MySQL: the look met a hold whose lease is over: released
			// (or lapsed) since, with nobody asked to ring, so the row
			// may be free. Once in a row only.
			w.retried = true
			return false, true, nil
		}
		return false, false, nil // no marker, no bell; or it lapses anyway
	}
	h := b.h // as the look saw it: the lease left is fresh
	if a, ok := w.asked[b.name]; ok && a.key == h.key && a.token == h.token {
		h.rings, h.bell = a.rings, a.bell
	} else {
		var res askResult
		switch res, h, err = w.l.askWake(ctx, b.name, b.h); res {
		case askFailed:
			return false, false, err // err is ctx's, or nil: the waiter polls
		case askEnded:
			if live || !w.retried {
				w.retried = !live // counts the lapsed ones in a row only
				return false, true, nil
			}
			return false, false, nil
		case askNotArmed:
			return false, false, nil // its session does not ring
		}
		if w.asked == nil {
			w.asked = make(map[string]holderInfo)
		}
		w.asked[b.name] = h
	}
	b.h = h
	// Watched at every pause: the watcher forgets a target once it has
	// woken its waiter.
	if h.rings && !w.l.watch.Watch(b.name, wake.Target{Key: h.key, Token: h.token, Rings: true, Bell: h.bell, By: w.W}) {
		// Declined: seen rung already (its session has ended, or a record
		// failed). The holder's marker is watched instead, or a dead
		// holder would keep the row for its lease
		// (model/mutants/doorbell_stale_polls.pml); the waiter polls.
		delete(w.asked, b.name)
		b.h.rings = false
		return false, false, nil
	}
	return true, false, nil
}

// watch has the watcher wait on what keeps each blocker that is not on a
// bell (ask watches those) from the waiter, and returns the soonest lease
// left (0 if none is known): the holder's session marker if its lease
// outlasts the crash grace; for a lapsed row (queued), the oldest older
// fair waiter with a session marker, which the lock is kept for: dead, it
// would keep the lock from everyone until its place lapsed.
func (w *waiter) watch(ctx context.Context, blockers []blocker) time.Duration {
	var soonest time.Duration
	for _, b := range blockers {
		h := b.h
		if h.remaining > 0 && (soonest == 0 || h.remaining < soonest) {
			soonest = h.remaining
		}
		if h.rings {
			continue // the bell's wait sees the session end too
		}
		switch g := w.l.cfg.crashGrace; {
		case g <= 0:
		case h.remaining > g:
			w.l.watch.Watch(b.name, wake.Target{Key: h.key, Token: h.token, By: w.W})
		case h.remaining <= 0 && w.queued:
			// A failed look costs nothing but speed: the next pause
			// looks again.
			if id, key, found, err := w.l.queue.Blocker(ctx, b.name, w.queueID); err == nil && found {
				w.l.watch.Watch(b.name, wake.Target{Key: key, ID: id, By: w.W})
			}
		}
	}
	return soonest
}

// rings reports whether a ring will wake the waiter for each of its
// blockers' releases that it asked about (MySQL).
func (w *waiter) rings() bool {
	for _, h := range w.asked {
		if h.rings {
			return true
		}
	}
	return false
}

// end takes the waiter off its names, waking the next waiter of each.
func (w *waiter) end() {
	w.StopTimer()
	for _, name := range w.names {
		w.l.watch.Forget(name, w.W)
	}
	w.l.waiters.RemoveUnder(w.names, w.W)
}
