// Package leader elects one leader among replicas with any dblock.Locker:
// the replica holding the lock leads and runs a function until the lock is
// lost or the function returns, and the others campaign for it meanwhile.
// A leader cut off from the database steps down (its function's context is
// canceled) before its lease could lapse, so two replicas never both believe
// they lead, as judged by the database clock.
//
// # Followers
//
// Any replica can ask who leads (Leader.Leader) and watch the leadership
// change (Leader.Observe), whether it campaigns (Run) or not: a replica
// that only follows makes a Leader with New and never calls Run. The
// answer is the lock's row as the database has it now: the leader's
// owner, the fencing token of its term (it grows with every new term),
// and the value it advertises (WithValue, kept as the lock's dblock.Note,
// as etcd's leaders proclaim a value). Only a Locker that can tell who
// holds a lock can answer (HolderTeller: rowlock's Locker can); over any
// other, Leader and Observe return ErrCannotTell. forupdate's cannot: its
// lock is a row lock held by an open transaction, and its rows record no
// holder and no note.
//
// Observe polls (WithObserveInterval, default DefaultObserveInterval): it
// reports the leadership as each poll finds it, so a change that comes and
// goes between two polls may be missed. A leader whose process dies is
// seen gone once its lease has lapsed or another replica has taken over.
//
// # Stepping down
//
// Leader.Resign ends the current term without ending Run: the function's
// context is canceled with the cause ErrResigned, the lock is released once
// the function has returned, and Run sits out for the resign pause
// (WithResignPause, default DefaultResignPause) before it campaigns again,
// so that another replica takes over. To stop campaigning for good, cancel
// Run's context instead.
//
// # Logging
//
// A Leader logs where its Locker does (rowlock.WithLogger,
// forupdate.WithLogger): elections at Info, lost leadership at Warn, errors
// at Error. A dblock.Locker of another kind can say where by having a
// Logger() *slog.Logger method; without one, the Leader logs to
// slog.Default() at Warn and above.
package leader
