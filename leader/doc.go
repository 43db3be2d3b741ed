// Package leader elects one leader among replicas over any dblock.Locker.
// The replica holding the lock leads and runs a function until the lock is
// lost or the function returns; the others campaign meanwhile.
//
//	ld, err := leader.New(locker, "leaders/indexer", func(ctx context.Context) error {
//		return index(ctx) // ctx is canceled when leadership is lost
//	}, leader.WithLockOptions(dblock.TTL(10*time.Second)))
//	if err != nil {
//		return err
//	}
//	go ld.Run(ctx) // campaigns, leads, and campaigns again after a loss
//
// ExampleLeader runs this against a real database; ExampleLeader_Leader,
// ExampleLeader_Observe and ExampleLeader_Resign show following and
// stepping down.
//
// # Safety rule: never two leaders
//
// A leader cut off from the database steps down before its lease could
// lapse: its function's context is canceled first. So two replicas never
// both believe they lead, as judged by the database clock. Each term has
// the lock's fencing token, which grows with every new term.
//
// # Followers
//
// Any replica can ask who leads (Leader.Leader) and watch it change
// (Leader.Observe), whether it campaigns or not: a replica that only
// follows makes a Leader with a nil function and never calls Run. The
// answer is the lock's row as the database has it now: the leader's
// owner, its term's token, and the value it advertises (WithValue). Only a
// Locker that can tell who holds a lock can answer (HolderTeller, as
// rowlock's Locker is); over any other, Leader and Observe return
// ErrCannotTell. Observe polls (WithObserveInterval, default
// DefaultObserveInterval), so a change that comes and goes between two
// polls may be missed.
//
// # Stepping down
//
// Leader.Resign ends the current term without ending Run. The function's
// context is canceled with the cause ErrResigned, the lock is released once
// the function has returned, and Run sits out for WithResignPause (default
// DefaultResignPause) before it campaigns again. To stop campaigning for
// good, cancel Run's context.
//
// # Logs
//
// A Leader logs where its Locker does (rowlock.WithLogger,
// forupdate.WithLogger): elections at Info, lost leadership at Warn, errors
// at Error. Over a Locker of another kind it logs to slog.Default() at Warn
// and above.
package leader
