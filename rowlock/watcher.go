package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
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
// A blocked wait gives up after markerWait and starts again while a
// waiter still needs it, so a watch nobody needs any more ends within
// markerWait and costs one statement per markerWait while it lasts.
type watcher struct {
	db      *sql.DB
	store   store
	queue   *queue.Queue
	grace   time.Duration
	waiters *waitlist
	logger  *slog.Logger

	mu      sync.Mutex
	targets map[string]target // by name: what the first waiter of the name waits on
	keys    map[int64]bool    // markers with a wait running
	ctx     context.Context   // canceled by close
	stop    context.CancelFunc
	wg      sync.WaitGroup
	closed  bool
	warned  bool
}

// target is a marked holder, or an older marked fair waiter, that a waiter
// waits on.
type target struct {
	key   int64
	token int64 // of the holder's row; 0 for a fair waiter
	id    int64 // of the fair waiter's row; 0 for a holder
	by    *waiter
}

const (
	// markerWait is how long one blocked wait on a marker lasts.
	markerWait = 5 * time.Second
	// maxMarkerWaits caps the connections a Locker's watcher blocks at
	// once; beyond it waiters are left to the lease.
	maxMarkerWaits = 4
)

// watch makes name wait on t until forget, or until t is found dead.
func (wa *watcher) watch(name string, t target) {
	if wa.grace <= 0 || t.key == 0 {
		return
	}
	wa.mu.Lock()
	defer wa.mu.Unlock()
	if wa.closed {
		return
	}
	if wa.targets == nil {
		wa.targets = make(map[string]target)
		wa.keys = make(map[int64]bool)
		wa.ctx, wa.stop = context.WithCancel(context.Background())
	}
	wa.targets[name] = t
	if wa.keys[t.key] {
		return
	}
	if len(wa.keys) >= maxMarkerWaits || !reserveSessionConn(wa.db) {
		if !wa.warned {
			wa.warned = true
			wa.logger.Warn("rowlock: no connection to spare for watching holders' session markers; some waiters wait for leases to lapse")
		}
		return
	}
	wa.keys[t.key] = true
	wa.wg.Add(1)
	go wa.run(wa.ctx, t.key)
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

// needed reports whether some name still waits on key; if not, the wait
// on key ends (under mu, so that a new watch starts a new one).
func (wa *watcher) needed(key int64) bool {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	for _, t := range wa.targets {
		if t.key == key {
			return true
		}
	}
	delete(wa.keys, key)
	return false
}

// run waits on key's marker while a name needs it.
func (wa *watcher) run(ctx context.Context, key int64) {
	defer wa.wg.Done()
	defer releaseSessionConn(wa.db)
	for wa.needed(key) {
		gone, err := wa.store.awaitMarkerGone(ctx, key, markerWait)
		switch {
		case ctx.Err() != nil:
			wa.mu.Lock()
			delete(wa.keys, key)
			wa.mu.Unlock()
			return
		case err != nil:
			wa.logger.Warn("rowlock: waiting on a holder's session marker failed", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(wa.grace):
			}
		case gone:
			wa.shortenAll(ctx, key)
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
