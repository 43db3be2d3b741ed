package rowlock

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/queue"
)

// watcher checks, for a Locker's waiters, whether the holders they wait
// for (and the older fair waiters they queue behind) are still alive: every
// G/4, one statement through the pool asks which of their session markers
// are gone. A holder whose marker is gone gets its lease shortened to G (a
// dead fair waiter, its place), and the waiter of that name is woken to try
// again when that has run out. It runs only while some waiter waits on a
// marked holder.
type watcher struct {
	store   store
	queue   *queue.Queue
	grace   time.Duration
	waiters *waitlist
	logger  *slog.Logger

	mu      sync.Mutex
	targets map[string]target // by name: what the first waiter of the name waits on
	stop    context.CancelFunc
	done    chan struct{}
	closed  bool
}

// target is a marked holder, or an older marked fair waiter, that a waiter
// waits on.
type target struct {
	key   int64
	token int64 // of the holder's row; 0 for a fair waiter
	id    int64 // of the fair waiter's row; 0 for a holder
	by    *waiter
}

// watch makes w's name wait on t until forget or t is found dead.
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
	}
	wa.targets[name] = t
	if wa.stop == nil {
		ctx, stop := context.WithCancel(context.Background())
		wa.stop, wa.done = stop, make(chan struct{})
		go wa.run(ctx, wa.done)
	}
}

// forget drops what w watched for name, if w set it.
func (wa *watcher) forget(name string, w *waiter) {
	wa.mu.Lock()
	if t, ok := wa.targets[name]; ok && t.by == w {
		delete(wa.targets, name)
	}
	wa.mu.Unlock()
}

// close stops the watcher and waits for it.
func (wa *watcher) close() {
	wa.mu.Lock()
	wa.closed = true
	stop, done := wa.stop, wa.done
	wa.stop, wa.done = nil, nil
	wa.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// run checks the targets every G/4 until none is left.
func (wa *watcher) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	ticker := time.NewTicker(wa.grace / 4)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		wa.mu.Lock()
		if len(wa.targets) == 0 {
			// Stopped under mu, so that a watch after this starts anew.
			wa.stop, wa.done = nil, nil
			wa.mu.Unlock()
			return
		}
		snapshot := make(map[string]target, len(wa.targets))
		keys := make([]int64, 0, len(wa.targets))
		for name, t := range wa.targets {
			snapshot[name] = t
			keys = append(keys, t.key)
		}
		wa.mu.Unlock()
		wa.check(ctx, snapshot, keys)
	}
}

// check asks which of keys are gone and shortens what they marked.
func (wa *watcher) check(ctx context.Context, targets map[string]target, keys []int64) {
	cctx, cancel := context.WithTimeout(ctx, wa.grace)
	defer cancel()
	dead, err := wa.store.deadMarkers(cctx, keys)
	if err != nil {
		if ctx.Err() == nil {
			wa.logger.Warn("rowlock: checking holders' session markers failed", "error", err)
		}
		return
	}
	for name, t := range targets {
		if _, gone := dead[t.key]; !gone {
			continue
		}
		err := lockkit.RetryContention(cctx, func() error {
			if t.id != 0 {
				_, err := wa.queue.Shorten(cctx, t.id, t.key, wa.grace)
				return err
			}
			_, err := wa.store.shorten(cctx, name, t.token, t.key, wa.grace)
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				wa.logger.Warn("rowlock: shortening a dead holder's lease failed", "name", name, "error", err)
			}
			continue
		}
		wa.mu.Lock()
		if cur, ok := wa.targets[name]; ok && cur == t {
			delete(wa.targets, name)
		}
		wa.mu.Unlock()
		// The waiter tries again, finds G left, and sleeps until then.
		wa.waiters.wakeFirst(name)
	}
}
