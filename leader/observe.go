package leader

import (
	"context"
	"time"
)

// DefaultObserveInterval is how often Observe asks the database who leads.
const DefaultObserveInterval = time.Second

// Observe watches who leads: it sends the leadership as the database has
// it at once, then again each time a poll finds it changed (a new term, or
// no leader: an Info whose Token is 0). It polls every observe interval
// (WithObserveInterval, default DefaultObserveInterval), one small query
// each; a change that comes and goes between two polls is not seen, and the
// same Info is never sent twice in a row. While the receiver is not ready
// Observe waits for it without polling, and then sends what the next poll
// finds, so a slow receiver sees the present, never a backlog.
//
// Observe needs no Run. Its goroutine stops when ctx ends, or when asking
// fails for a reason that retrying cannot mend (dblock.ErrClosed,
// ErrSchemaMissing, ...; logged at Error); then it closes the channel, its
// last act. Other failures (the database unreachable) are logged at Warn
// once, and polling goes on.
//
// Errors, at once and with a nil channel: ErrCannotTell when the Locker
// cannot tell who holds a lock (it is no HolderTeller),
// dblock.ErrInvalidOption for a nil ctx.
func (ld *Leader) Observe(ctx context.Context) (<-chan Info, error) {
	teller, err := ld.teller(ctx, "Observe")
	if err != nil {
		return nil, err
	}
	infos := make(chan Info)
	go ld.observe(ctx, teller, infos)
	return infos, nil
}

func (ld *Leader) observe(ctx context.Context, teller HolderTeller, infos chan<- Info) {
	defer close(infos)
	var (
		last    Info
		sent    bool
		failing bool // since the last poll that succeeded
	)
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wait.C:
		}
		info, err := ld.current(ctx, teller)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && permanent(err):
			ld.cfg.logger.Error("leader: cannot observe the leadership; stopping", "name", ld.name, "error", err)
			return
		case err != nil:
			if !failing {
				ld.cfg.logger.Warn("leader: observing the leadership failed; retrying", "name", ld.name, "error", err)
			}
			failing = true
		default:
			if failing {
				ld.cfg.logger.Info("leader: observing the leadership again", "name", ld.name)
			}
			failing = false
			if !sent || info != last {
				select {
				case infos <- info:
				case <-ctx.Done():
					return
				}
				last, sent = info, true
			}
		}
		wait.Reset(ld.cfg.observeInterval)
	}
}
