package rowlock

import (
	"time"

	"github.com/sqllock/sqllock/internal/wake"
)

// StripeOf exposes stripeOf to the external tests, which block a fresh
// name's insert by locking its stripe's counter.
var StripeOf = stripeOf

// WatchMarkerFor has l's watcher wait on the session marker key for name,
// as it does for a waiter whose holder's bell it cannot follow, each wait
// lasting d. It reports whether the wait runs.
func WatchMarkerFor(l *Locker, name string, key int64, d time.Duration) bool {
	l.watch = l.newWatcher(d) // before any wait starts: l is fresh
	return l.watch.Watch(name, wake.Target{Key: key, Token: 1})
}

// WatchBell has l's watcher wait on bell generation gen of the session
// marker key for name, as for a waiter that armed that bell. It reports
// whether a ring will wake name.
func WatchBell(l *Locker, name string, key, gen int64) bool {
	return l.watch.Watch(name, wake.Target{Key: key, Token: 1, Rings: true, Bell: gen})
}

// WithPollInterval sets the range of pauses between a waiter's tries, for
// tests that must tell a wake-up from a poll (an hour: never polls).
func WithPollInterval(minimum, maximum time.Duration) Option {
	return withPacing(pacing{minPoll: minimum, maxPoll: maximum})
}

// WithIdleRecheck sets how often waiters that are not the first of their
// name in the Locker check the lock on their own.
func WithIdleRecheck(d time.Duration) Option { return withPacing(pacing{idleRecheck: d}) }

// WithListenerIdle sets how long the session connection outlives the
// Locker's last lock and last waiter.
func WithListenerIdle(d time.Duration) Option { return withPacing(pacing{sessionIdle: d}) }

// MaxReaders is maxReaders, for tests that look at every reader row.
const MaxReaders = maxReaders
