package rowlock

import (
	"context"
	"errors"

	"github.com/sqllock/sqllock/internal/lockkit"
)

// askResult is what came of asking for a hold's release to be announced.
type askResult int

const (
	askArmed    askResult = iota // its release will wake the waiter
	askNotArmed                  // not asked: its session does not ring (MySQL)
	askEnded                     // it came free (or lapsed) since the look
	askFailed                    // the ask failed (logged), or ctx ended
)

// askWake asks that the release of the hold h of name be announced to
// this Locker (NOTIFY; a doorbell): releases are announced only when
// asked for. Acquire's waiters and the kinds' ask through it alike. It
// returns the hold as the database saw it when armed or ended, and h
// otherwise. err is set only when ctx ended (it is ctx's); any other
// failure is logged and leaves the waiter to poll.
func (l *Locker) askWake(ctx context.Context, name string, h holderInfo) (askResult, holderInfo, error) {
	var armed bool
	var now holderInfo
	err := lockkit.RetryContention(ctx, func() (err error) {
		armed, now, err = l.store.wantWake(ctx, name, h)
		return err
	})
	switch {
	case errors.Is(err, errHoldEnded):
		return askEnded, now, nil
	case err != nil && ctx.Err() != nil:
		return askFailed, h, ctx.Err()
	case err != nil:
		l.cfg.logger.Warn("rowlock: asking for a wake-up failed; polling", "name", name, "error", err)
		return askFailed, h, nil
	case !armed:
		return askNotArmed, h, nil // the holder's session does not ring
	}
	return askArmed, now, nil
}
