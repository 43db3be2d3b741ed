package queue

import (
	"context"
	"sync"
	"time"
)

// settleTimeout bounds a statement that must run to its end although the
// caller's ctx has ended: an enqueue whose outcome must be known, a leave.
const settleTimeout = 5 * time.Second

// settling returns a context that ends settleTimeout after ctx ends, not
// with it: statements under it run as long as the caller waits (contention
// retried, lock waits), and once the caller has given up, at most
// settleTimeout more, so that their outcome is known.
func settling(ctx context.Context) (context.Context, context.CancelFunc) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var mu sync.Mutex
	var grace *time.Timer
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		grace = time.AfterFunc(settleTimeout, cancel)
		mu.Unlock()
	})
	return sctx, func() {
		stop()
		mu.Lock()
		if grace != nil {
			grace.Stop()
		}
		mu.Unlock()
		cancel()
	}
}
