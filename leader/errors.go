package leader

import "errors"

// Sentinel errors; test for them with errors.Is.
var (
	// ErrNoLeader is returned by Leader.Leader when no one leads now: no
	// replica holds the lock, or the last leader's lease has lapsed.
	ErrNoLeader = errors.New("leader: no leader")

	// ErrNotLeader is returned by Resign when this Leader does not lead.
	ErrNotLeader = errors.New("leader: not the leader")

	// ErrResigned is the cause of the function's context (context.Cause)
	// when its term was ended by Resign.
	ErrResigned = errors.New("leader: resigned")

	// ErrCannotTell is returned by Leader.Leader and Observe when the
	// Locker cannot tell who holds a lock (it is no HolderTeller), as
	// forupdate's cannot. Use rowlock's Locker to follow a leader.
	ErrCannotTell = errors.New("leader: this Locker cannot tell who holds a lock")
)
