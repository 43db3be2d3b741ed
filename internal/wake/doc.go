// Package wake is rowlock's wake-up and liveness engine: what lets a
// waiter sleep until the lock it wants may be free, and lets others tell
// that a holder's process died.
//
// In memory: the waiters of a Locker by name (List), how long one sleeps
// between tries (Pacer), and the sleep itself (Sleeper). Only the first
// waiter of a name polls and asks the database for a wake-up; the others
// sleep until it leaves (it wakes the next) or a release of their own
// Locker wakes them, so idle waiters cost the database nothing. A waiter
// of several names (a semaphore's slots, a read/write lock's rows) is on
// the list of each.
//
// From the database: the Locker's Session, one connection that carries
// the session marker (crash detection), LISTEN (PostgreSQL) and the
// doorbell (MySQL, bell.go); and its Watcher, which blocks pool
// connections on the markers and bells of the holders its waiters wait
// for. Both reach the waiters only through List.WakeFirst. What they ask
// of a dialect beyond their own statements they ask of rowlock's store,
// through WatchStore; the locks taken under a marker are Held values.
//
// # Concurrency
//
// Each Locker owns its engine: a Session, a Watcher and a List. Lockers
// share no mutable state but the per-pool count of reserved connections
// (pool.go).
//
// Goroutines. The engine starts two kinds, and the Locker owns both:
//
//   - Session.run, one per incarnation of the session connection. The
//     session starts it (startLocked) when an acquisition or a waiter needs
//     a marker or LISTEN. Its idle timer, Close once no lock relies on it,
//     or a failed connection stop it. Session.Close and the last
//     Unregister after Close wait for it.
//   - Watcher.run, one per watched marker or bell. Watcher.Watch starts it;
//     it ends when no waiter needs it. Watcher.Close cancels it and waits.
//
// Waiters run on their callers' goroutines and block only in their
// Sleeper.
//
// Lock order: List's mu, then Session.mu (the list tells the session,
// under its lock, when it gains its first waiter and loses its last);
// Watcher.mu, then the pool count (Watch reserves a connection). No other
// lock is held while one of these is taken. The session's and the
// watcher's goroutines wake waiters holding no lock. Nothing waits for a
// goroutine while it holds a lock.
//
// docs/concurrency.md follows one wake-up on each database, hop by hop.
package wake
