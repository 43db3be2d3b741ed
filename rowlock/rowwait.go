package rowlock

import (
	"context"
	"errors"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// rowWait is a wait for a change among several rows of the lock table,
// where Acquire waits for one: any slot of a semaphore to come free, a
// read/write lock's writer to leave, its readers to leave. The waiter is
// on the Locker's waitlist under every one of the names, so a release of
// any of them in this process wakes it, as does a NOTIFY from another
// process (PostgreSQL) when it asked for one; it has the watcher watch the
// holders' session markers; and it polls as Acquire's waiters do, only the
// first waiter of the names in the Locker polling.
type rowWait struct {
	l     *Locker
	names []string
	w     *waiter
	pacer pacer
	// listening is true while the Locker's session listens for releases.
	listening bool
	// armed are the tokens of the holds whose release was asked to be
	// announced, by name: a hold stays armed until its row changes hands.
	armed map[string]int64
	timer *time.Timer
}

// startRowWait puts a waiter on names; end takes it off.
func (l *Locker) startRowWait(names []string) *rowWait {
	w := &waiter{wake: make(chan struct{}, 1)}
	l.waiters.addUnder(names, w)
	return &rowWait{
		l:     l,
		names: names,
		w:     w,
		pacer: pacer{
			minPoll:           l.cfg.minPoll,
			maxPoll:           l.cfg.maxPoll,
			maxPollUnnotified: l.cfg.maxPollUnnotified,
		},
	}
}

// blocker is a held row a rowWait waits on.
type blocker struct {
	name string
	// h is its holder: the lease left, and its session marker.
	h holderInfo
}

// wait sleeps after a look that found blockers in the way, until one of
// them may have changed or ctx ends (the error then joins
// dblock.ErrNotAcquired and ctx.Err()).
func (rw *rowWait) wait(ctx context.Context, blockers []blocker) error {
	pause, err := rw.pause(ctx, blockers)
	if err != nil {
		return cutShort(ctx, err)
	}
	if pause <= 0 {
		return nil
	}
	if rw.timer == nil {
		rw.timer = time.NewTimer(pause)
	} else {
		rw.timer.Reset(pause)
	}
	select {
	case <-ctx.Done():
		return errors.Join(dblock.ErrNotAcquired, ctx.Err())
	case <-rw.w.wake:
		rw.pacer.reset()
	case <-rw.timer.C:
	}
	if rw.listening {
		// The session may have stopped (lost connection); restart it.
		rw.listening = rw.l.sess.listening(ctx)
	}
	return nil
}

// pause is how long to sleep: until woken, for a waiter that is not the
// first of any of its names in the Locker (the first polls, and wakes the
// next when it leaves); for the first, until a blocker's lease lapses or
// a release is announced, or the next poll.
func (rw *rowWait) pause(ctx context.Context, blockers []blocker) (time.Duration, error) {
	if !rw.l.waiters.firstOfAny(rw.names, rw.w) {
		return rw.l.cfg.idleRecheck, nil
	}
	if rw.l.sess.listen && !rw.listening {
		if rw.listening = rw.l.sess.listening(ctx); rw.listening {
			// A release between the look and LISTEN was announced to
			// nobody: look again now.
			return 0, nil
		}
	}
	notified := rw.listening
	for i, b := range blockers {
		if !notified {
			break
		}
		if token, ok := rw.armed[b.name]; ok && token == b.h.token {
			continue // asked already, of this very hold
		}
		armed, h, err := rw.askWake(ctx, b.name)
		switch {
		case errors.Is(err, errHoldEnded):
			return 0, nil // it came free (or lapsed) since the look
		case err != nil && ctx.Err() != nil:
			return 0, err
		case err != nil:
			rw.l.cfg.logger.Warn("rowlock: asking for a wake-up failed; polling", "name", b.name, "error", err)
			notified = false
		case !armed:
			return 0, nil // it came free (or lapsed) since the look
		default:
			blockers[i].h = h
			if rw.armed == nil {
				rw.armed = make(map[string]int64)
			}
			rw.armed[b.name] = h.token
		}
	}
	var soonest time.Duration
	for _, b := range blockers {
		if b.h.remaining > 0 && (soonest == 0 || b.h.remaining < soonest) {
			soonest = b.h.remaining
		}
		if g := rw.l.cfg.crashGrace; g > 0 && b.h.remaining > g {
			rw.l.watch.watch(b.name, target{key: b.h.key, token: b.h.token, by: rw.w})
		}
	}
	return rw.pacer.next(soonest, notified), nil
}

// askWake asks that the release of name be announced (see
// waiting.askWake).
func (rw *rowWait) askWake(ctx context.Context, name string) (armed bool, h holderInfo, err error) {
	err = lockkit.RetryContention(ctx, func() (err error) {
		armed, h, err = rw.l.store.wantWake(ctx, name, holderInfo{})
		return err
	})
	return armed, h, err
}

// end takes the waiter off its names, waking the next waiter of each.
func (rw *rowWait) end() {
	if rw.timer != nil {
		rw.timer.Stop()
	}
	for _, name := range rw.names {
		rw.l.watch.forget(name, rw.w)
	}
	rw.l.waiters.removeUnder(rw.names, rw.w)
}

// addUnder puts w on the list of each of names.
func (wl *waitlist) addUnder(names []string, w *waiter) {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	if wl.byName == nil {
		wl.byName = make(map[string][]*waiter)
	}
	for _, name := range names {
		wl.byName[name] = append(wl.byName[name], w)
		wl.total++
		if wl.total == 1 {
			wl.busy()
		}
	}
}

// removeUnder takes w off the list of each of names.
func (wl *waitlist) removeUnder(names []string, w *waiter) {
	for _, name := range names {
		wl.remove(name, w)
	}
}

// firstOfAny reports whether w is the waiter that polls for one of names.
func (wl *waitlist) firstOfAny(names []string, w *waiter) bool {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	for _, name := range names {
		if first(wl.byName[name]) == w {
			return true
		}
	}
	return false
}
