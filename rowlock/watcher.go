package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/queue"
)

// watcher learns, for a Locker's waiters, when the holder they wait for
// (or the older fair waiter they queue behind) dies, without polling: for
// each such session marker it blocks one pool connection in the database
// on the marker itself (pg_advisory_xact_lock_shared; GET_LOCK), which the
// server grants the moment the marker's session ends. Then it shortens the
// holder's lease to G (a dead fair waiter's place, likewise) and wakes the
// waiter of that name, which takes the lock once that has lapsed.
//
// On MySQL a waiter whose holder's session rings (bell.go) has the watcher
// block on the holder's bell instead: the wait ends at a ring, which wakes
// every waiter of this Locker that waits on that session, or when the
// session ends, which is then handled as above.
//
// A blocked wait gives up after markerWait and starts again while a
// waiter still needs it, so a watch nobody needs any more ends within
// markerWait and costs one statement per markerWait while it lasts.
//
// A session's bells and its marker are waited on apart, each by a
// goroutine of its own: a bell rings the moment its session releases a
// lock a waiter armed, and a wait on the marker alone would keep such a
// waiter asleep until the marker wait ended (up to markerWait), while the
// waiter, told that a ring wakes it, does not poll.
type watcher struct {
	db      *sql.DB
	store   store
	queue   *queue.Queue
	grace   time.Duration
	waiters *waitlist
	logger  *slog.Logger
	// blockFor is how long one blocked wait lasts: markerWait, but for
	// tests that must tell a wait that ends from a wake-up.
	blockFor time.Duration
	// perNode reports that markers are each node's own (a Galera
	// cluster, cluster.go): none is watched, whoever recorded it.
	perNode func() bool

	mu      sync.Mutex
	targets map[string]target // by name: what the first waiter of the name waits on
	waits   map[wait]bool     // the waits running
	// rung is, by marker key, the newest bell generation found rung
	// while its session lived: a waiter that read it or an older one
	// read a stale generation (the ring's record is on its way) and polls
	// instead of waking at once again and again. A session found ended
	// has every generation rung (deadSession): its bells are all free,
	// and a wait on one would return at once, again and again, until
	// the lease it cut short lapsed.
	rung   map[int64]int64
	ctx    context.Context // canceled by close
	stop   context.CancelFunc
	wg     sync.WaitGroup
	closed bool
	warned bool
}

// target is a marked holder, or an older marked fair waiter, that a waiter
// waits on.
type target struct {
	key   int64
	token int64 // of the holder's row; 0 for a fair waiter
	id    int64 // of the fair waiter's row; 0 for a holder
	// rings is true when the waiter armed the holder's release to ring
	// bell generation bell of key (MySQL, bell.go).
	rings bool
	bell  int64
	by    *waiter
}

// wait is what one of the watcher's goroutines blocks on: a session's
// marker, or (bell) the oldest of its bells that a target armed.
type wait struct {
	key  int64
	bell bool
}

// of reports whether t is waited on by w.
func (w wait) of(t target) bool { return t.key == w.key && t.rings == w.bell }

// deadSession is watcher.rung's generation for a session found ended.
const deadSession = math.MaxInt64

// maxRungKeys bounds watcher.rung.
const maxRungKeys = 1024

const (
	// markerWait is how long one blocked wait on a marker lasts.
	markerWait = 5 * time.Second
	// maxMarkerWaits caps the connections a Locker's watcher blocks at
	// once (marker and bell waits together); beyond it waiters are left to
	// the lease, or poll.
	maxMarkerWaits = 4
)

// watch makes name wait on t until forget, or until t is found dead (or,
// for a target that rings, rung). It reports whether a wait on t's
// session runs: for a target that rings, whether a ring will wake name.
func (wa *watcher) watch(name string, t target) bool {
	if (wa.grace <= 0 && !t.rings) || t.key == 0 || (wa.perNode != nil && wa.perNode()) {
		return false
	}
	wa.mu.Lock()
	defer wa.mu.Unlock()
	if wa.closed {
		return false
	}
	if wa.targets == nil {
		wa.targets = make(map[string]target)
		wa.waits = make(map[wait]bool)
		wa.rung = make(map[int64]int64)
		wa.ctx, wa.stop = context.WithCancel(context.Background())
	}
	if t.rings {
		if gen, ok := wa.rung[t.key]; ok && t.bell <= gen {
			return false
		}
	}
	wa.targets[name] = t
	w := wait{key: t.key, bell: t.rings}
	if wa.waits[w] {
		return true
	}
	if len(wa.waits) >= maxMarkerWaits || !reserveSessionConn(wa.db) {
		delete(wa.targets, name)
		if !wa.warned {
			wa.warned = true
			wa.logger.Warn("rowlock: no connection to spare for watching holders' sessions; some waiters poll, or wait for leases to lapse")
		}
		return false
	}
	wa.waits[w] = true
	wa.wg.Add(1)
	go wa.run(wa.ctx, w)
	return true
}

// forget drops what w watched for name, if w set it.
func (wa *watcher) forget(name string, w *waiter) {
	wa.mu.Lock()
	if t, ok := wa.targets[name]; ok && t.by == w {
		delete(wa.targets, name)
	}
	wa.mu.Unlock()
}

// close stops every wait and waits for them.
func (wa *watcher) close() {
	wa.mu.Lock()
	wa.closed = true
	stop := wa.stop
	wa.mu.Unlock()
	if stop != nil {
		stop()
	}
	wa.wg.Wait()
}

// needed reports whether some name still needs w; if not, w ends (under
// mu, so that a new watch starts a new one). For a bell wait it also
// returns the oldest generation armed.
func (wa *watcher) needed(w wait) (gen int64, ok bool) {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	for _, t := range wa.targets {
		if w.of(t) && (!ok || t.bell < gen) {
			gen, ok = t.bell, true
		}
	}
	if !ok {
		delete(wa.waits, w)
	}
	return gen, ok
}

// await blocks until w's session ends (gone), or, for a bell wait, until
// bell generation gen rings: rung and gone are then both handled here.
func (wa *watcher) await(ctx context.Context, w wait, gen int64) (gone bool, err error) {
	key := w.key
	if !w.bell {
		return wa.store.awaitMarkerGone(ctx, key, wa.blockFor)
	}
	_, err = wa.store.awaitBell(ctx, key, gen, wa.blockFor, func(dead bool) {
		if dead {
			wa.ended(ctx, key)
			return
		}
		wa.setRung(key, gen)
		wa.wakeAll(key)
	})
	return false, err
}

// setRung records that generation gen of key's bells has rung.
func (wa *watcher) setRung(key, gen int64) {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	if len(wa.rung) >= maxRungKeys {
		clear(wa.rung)
	}
	wa.rung[key] = max(wa.rung[key], gen)
}

// ended handles the end of key's session: none of its bells will ring
// again, and what it marked is cut short.
func (wa *watcher) ended(ctx context.Context, key int64) {
	wa.setRung(key, deadSession)
	wa.shortenAll(ctx, key)
}

// wakeAll wakes the waiters of every name that waits on key: its session
// rang. They try again, and watch again if they must wait.
func (wa *watcher) wakeAll(key int64) {
	wa.mu.Lock()
	var names []string
	for name, t := range wa.targets {
		if t.key == key {
			names = append(names, name)
			delete(wa.targets, name)
		}
	}
	wa.mu.Unlock()
	for _, name := range names {
		wa.waiters.wakeFirst(name)
	}
}

// run waits on w while a name needs it.
func (wa *watcher) run(ctx context.Context, w wait) {
	defer wa.wg.Done()
	defer releaseSessionConn(wa.db)
	for {
		gen, ok := wa.needed(w)
		if !ok {
			return
		}
		gone, err := wa.await(ctx, w, gen)
		switch {
		case ctx.Err() != nil:
			wa.mu.Lock()
			delete(wa.waits, w)
			wa.mu.Unlock()
			return
		case err != nil:
			wa.logger.Warn("rowlock: waiting on a holder's session marker failed", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(max(wa.grace, time.Second)): // at least a second: grace may be 0 (bells only)
			}
		case gone:
			wa.ended(ctx, w.key)
		}
	}
}

// shortenAll cuts what key marked short and wakes its waiters.
func (wa *watcher) shortenAll(ctx context.Context, key int64) {
	wa.mu.Lock()
	targets := make(map[string]target)
	for name, t := range wa.targets {
		if t.key == key {
			targets[name] = t
			delete(wa.targets, name)
		}
	}
	wa.mu.Unlock()
	for name, t := range targets {
		if wa.grace <= 0 {
			// Without crash detection of its own, this Locker only wakes
			// the waiter (a bell showed the session gone): the lease
			// decides.
			wa.waiters.wakeFirst(name)
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, wa.grace)
		err := lockkit.RetryContention(sctx, func() error {
			if t.id != 0 {
				_, err := wa.queue.Shorten(sctx, t.id, t.key, wa.grace)
				return err
			}
			_, err := wa.store.shorten(sctx, name, t.token, t.key, wa.grace)
			return err
		})
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			wa.logger.Warn("rowlock: shortening a dead holder's lease failed", "name", name, "error", err)
		}
		// The waiter tries again, finds G left, and sleeps until then
		// (or polls on, if the shortening failed).
		wa.waiters.wakeFirst(name)
	}
}
