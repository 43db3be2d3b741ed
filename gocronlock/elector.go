package gocronlock

import (
	"context"
	"errors"

	"github.com/go-co-op/gocron/v2"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/leader"
)

// ErrNotLeader is what Elector.IsLeader returns on replicas that do not lead.
var ErrNotLeader = errors.New("gocronlock: not the leader")

// Elector implements gocron.Elector with a leader.Leader: the replica
// holding the lock leads and runs the jobs.
type Elector struct {
	leader *leader.Leader
}

var _ gocron.Elector = (*Elector)(nil)

// NewElector returns an Elector campaigning for the lock name with l. Call
// Run to campaign. The options and errors are leader.New's.
func NewElector(l dblock.Locker, name string, opts ...leader.Option) (*Elector, error) {
	ld, err := leader.New(l, name, nil, opts...)
	if err != nil {
		return nil, err
	}
	return &Elector{leader: ld}, nil
}

// Run campaigns and holds the leadership until ctx ends; it returns
// ctx.Err() then, with the lock released (see leader.Leader.Run). Run it in
// a goroutine for as long as the scheduler runs, and wait for it on shutdown.
func (e *Elector) Run(ctx context.Context) error { return e.leader.Run(ctx) }

// IsLeader returns nil while this replica leads and ErrNotLeader otherwise;
// gocron skips a run when it returns an error.
func (e *Elector) IsLeader(context.Context) error {
	if e.leader.IsLeader() {
		return nil
	}
	return ErrNotLeader
}

// Leader is the underlying leader.Leader, for its Lock (fencing token).
func (e *Elector) Leader() *leader.Leader { return e.leader }
