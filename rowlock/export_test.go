package rowlock

import "time"

// StripeOf exposes stripeOf to the external tests, which block a fresh
// name's insert by locking its stripe's counter.
var StripeOf = stripeOf

// WatchMarkerFor has l's watcher wait on the session marker key for name,
// as it does for a waiter whose holder's bell it cannot follow, each wait
// lasting d. It reports whether the wait runs.
func WatchMarkerFor(l *Locker, name string, key int64, d time.Duration) bool {
	l.watch.blockFor = d // before any wait starts: l is fresh
	return l.watch.watch(name, target{key: key, token: 1})
}

// WatchBell has l's watcher wait on bell generation gen of the session
// marker key for name, as for a waiter that armed that bell. It reports
// whether a ring will wake name.
func WatchBell(l *Locker, name string, key, gen int64) bool {
	return l.watch.watch(name, target{key: key, token: 1, rings: true, bell: gen})
}
