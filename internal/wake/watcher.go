package wake

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

// Watcher learns, for a Locker's waiters, when the holder they wait for
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
// A blocked wait gives up after MarkerWait and starts again while a
// waiter still needs it, so a watch nobody needs any more ends within
// MarkerWait and costs one statement per MarkerWait while it lasts.
//
// A session's bells and its marker are waited on apart, each by a
// goroutine of its own: a bell rings the moment its session releases a
// lock a waiter armed, and a wait on the marker alone would keep such a
// waiter asleep until the marker wait ended (up to MarkerWait), while the
// waiter, told that a ring wakes it, does not poll.
type Watcher struct {
	cfg WatcherConfig // as NewWatcher got it; never changed

	mu      sync.Mutex
	targets map[string]Target // by name: what the first waiter of the name waits on
	waits   map[wait]bool     // the waits running
	// rung is, by marker key, the newest bell generation found rung
	// while its session lived: a waiter that read it or an older one
	// read a stale generation (a record that failed, or a woken watcher
	// that held the bell as it was read) and polls instead of waking at
	// once again and again. A session found ended
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

// WatchStore is what the watcher asks of the database: rowlock's store
// per dialect.
type WatchStore interface {
	// AwaitBell blocks, for at most wait, on generation gen of the
	// doorbell of the session marked key (MySQL; bell.go), and runs woke
	// if it is granted, with dead true when the session has ended.
	AwaitBell(ctx context.Context, key, gen int64, wait time.Duration, woke func(dead bool)) (rung bool, err error)
	// AwaitMarkerGone blocks, for at most wait, until no session holds
	// the session marker key; gone is false when wait ran out first.
	AwaitMarkerGone(ctx context.Context, key int64, wait time.Duration) (gone bool, err error)
	// Shorten ends the lease of name's row, held with token under the
	// session marker key, at most grace from now by the database clock
	// (never before its MinHold): its holder's session has ended. It
	// never lengthens a lease and touches no other hold.
	Shorten(ctx context.Context, name string, token, key int64, grace time.Duration) (bool, error)
}

// WatcherConfig is what a Watcher is made of; all fields are required but
// PerNode.
type WatcherConfig struct {
	// DB is the pool whose connections the waits block.
	DB    *sql.DB
	Store WatchStore
	// Queue shortens a dead fair waiter's place.
	Queue *queue.Queue
	// Grace is the crash grace G; 0 watches only bells.
	Grace   time.Duration
	Waiters *List
	Logger  *slog.Logger
	// BlockFor is how long one blocked wait lasts (MarkerWait, but for
	// tests that must tell a wait that ends from a wake-up).
	BlockFor time.Duration
	// PerNode reports that markers are each node's own (a Galera
	// cluster): none is watched.
	PerNode func() bool
}

// NewWatcher returns a Locker's watcher; it starts no goroutine until a
// watch.
func NewWatcher(c WatcherConfig) *Watcher {
	return &Watcher{cfg: c}
}

// Target is a marked holder, or an older marked fair waiter, that a waiter
// waits on.
type Target struct {
	Key   int64 // the marker's
	Token int64 // of the holder's row; 0 for a fair waiter
	ID    int64 // of the fair waiter's row; 0 for a holder
	// Rings is true when the waiter armed the holder's release to ring
	// bell generation Bell of Key (MySQL, bell.go).
	Rings bool
	Bell  int64
	// By is the waiter that set the target (Forget drops only its own).
	By *Waiter
}

// wait is what one of the watcher's goroutines blocks on: a session's
// marker, or (bell) the oldest of its bells that a Target armed.
type wait struct {
	key  int64
	bell bool
}

// of reports whether t is waited on by w.
func (w wait) of(t Target) bool { return t.Key == w.key && t.Rings == w.bell }

// deadSession is watcher.rung's generation for a session found ended.
const deadSession = math.MaxInt64

// maxRungKeys bounds watcher.rung.
const maxRungKeys = 1024

const (
	// MarkerWait is how long one blocked wait on a marker lasts.
	MarkerWait = 5 * time.Second
	// maxMarkerWaits caps the connections a Locker's watcher blocks at
	// once (marker and bell waits together); beyond it waiters are left to
	// the lease, or poll.
	maxMarkerWaits = 4
)

// watch makes name wait on t until forget, or until t is found dead (or,
// for a Target that rings, rung). It reports whether a wait on t's
// session runs: for a Target that rings, whether a ring will wake name.
func (wa *Watcher) Watch(name string, t Target) bool {
	if (wa.cfg.Grace <= 0 && !t.Rings) || t.Key == 0 || (wa.cfg.PerNode != nil && wa.cfg.PerNode()) {
		return false
	}
	wa.mu.Lock()
	defer wa.mu.Unlock()
	if wa.closed {
		return false
	}
	if wa.targets == nil {
		wa.targets = make(map[string]Target)
		wa.waits = make(map[wait]bool)
		wa.rung = make(map[int64]int64)
		wa.ctx, wa.stop = context.WithCancel(context.Background())
	}
	if t.Rings {
		if gen, ok := wa.rung[t.Key]; ok && t.Bell <= gen {
			return false
		}
	}
	wa.targets[name] = t
	w := wait{key: t.Key, bell: t.Rings}
	if wa.waits[w] {
		return true
	}
	if len(wa.waits) >= maxMarkerWaits || !reserveConn(wa.cfg.DB) {
		delete(wa.targets, name)
		if !wa.warned {
			wa.warned = true
			wa.cfg.Logger.Warn("rowlock: no connection to spare for watching holders' sessions; some waiters poll, or wait for leases to lapse")
		}
		return false
	}
	wa.waits[w] = true
	wa.wg.Add(1)
	go wa.run(wa.ctx, w)
	return true
}

// forget drops what w watched for name, if w set it.
func (wa *Watcher) Forget(name string, w *Waiter) {
	wa.mu.Lock()
	if t, ok := wa.targets[name]; ok && t.By == w {
		delete(wa.targets, name)
	}
	wa.mu.Unlock()
}

// close stops every wait and waits for them.
func (wa *Watcher) Close() {
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
func (wa *Watcher) needed(w wait) (gen int64, ok bool) {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	for _, t := range wa.targets {
		if w.of(t) && (!ok || t.Bell < gen) {
			gen, ok = t.Bell, true
		}
	}
	if !ok {
		delete(wa.waits, w)
	}
	return gen, ok
}

// await blocks until w's session ends (gone), or, for a bell wait, until
// bell generation gen rings: rung and gone are then both handled here.
func (wa *Watcher) await(ctx context.Context, w wait, gen int64) (gone bool, err error) {
	key := w.key
	if !w.bell {
		return wa.cfg.Store.AwaitMarkerGone(ctx, key, wa.cfg.BlockFor)
	}
	_, err = wa.cfg.Store.AwaitBell(ctx, key, gen, wa.cfg.BlockFor, func(dead bool) {
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
func (wa *Watcher) setRung(key, gen int64) {
	wa.mu.Lock()
	defer wa.mu.Unlock()
	if len(wa.rung) >= maxRungKeys {
		clear(wa.rung)
	}
	wa.rung[key] = max(wa.rung[key], gen)
}

// ended handles the end of key's session: none of its bells will ring
// again, and what it marked is cut short.
func (wa *Watcher) ended(ctx context.Context, key int64) {
	wa.setRung(key, deadSession)
	wa.shortenAll(ctx, key)
}

// wakeAll wakes the waiters of every name that waits on key: its session
// rang. They try again, and watch again if they must wait.
func (wa *Watcher) wakeAll(key int64) {
	wa.mu.Lock()
	var names []string
	for name, t := range wa.targets {
		if t.Key == key {
			names = append(names, name)
			delete(wa.targets, name)
		}
	}
	wa.mu.Unlock()
	for _, name := range names {
		wa.cfg.Waiters.WakeFirst(name)
	}
}

// run waits on w while a name needs it.
func (wa *Watcher) run(ctx context.Context, w wait) {
	defer wa.wg.Done()
	defer releaseConn(wa.cfg.DB)
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
			wa.cfg.Logger.Warn("rowlock: waiting on a holder's session marker failed", "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(max(wa.cfg.Grace, time.Second)): // at least a second: grace may be 0 (bells only)
			}
		case gone:
			wa.ended(ctx, w.key)
		}
	}
}

// shortenAll cuts what key marked short and wakes its waiters.
func (wa *Watcher) shortenAll(ctx context.Context, key int64) {
	wa.mu.Lock()
	targets := make(map[string]Target)
	for name, t := range wa.targets {
		if t.Key == key {
			targets[name] = t
			delete(wa.targets, name)
		}
	}
	wa.mu.Unlock()
	for name, t := range targets {
		if wa.cfg.Grace <= 0 {
			// Without crash detection of its own, this Locker only wakes
			// the waiter (a bell showed the session gone): the lease
			// decides.
			wa.cfg.Waiters.WakeFirst(name)
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, wa.cfg.Grace)
		err := lockkit.RetryContention(sctx, func() error {
			if t.ID != 0 {
				_, err := wa.cfg.Queue.Shorten(sctx, t.ID, t.Key, wa.cfg.Grace)
				return err
			}
			_, err := wa.cfg.Store.Shorten(sctx, name, t.Token, t.Key, wa.cfg.Grace)
			return err
		})
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			wa.cfg.Logger.Warn("rowlock: shortening a dead holder's lease failed", "name", name, "error", err)
		}
		// The waiter tries again, finds G left, and sleeps until then
		// (or polls on, if the shortening failed).
		wa.cfg.Waiters.WakeFirst(name)
	}
}
