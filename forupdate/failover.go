package forupdate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// # Failover
//
// A forupdate lock is a transaction: when a PostgreSQL primary dies, its
// holders' transactions die with it, and on the promoted standby every
// row is free at once. A holder learns it at its next ping, or, if its
// connection hangs, at its deadline: 0.9·B after its last successful
// ping was sent, B being its belief (the TTL, at most P: Locker.belief).
// So, after a change of timeline, no forupdate lock is taken until the
// database clock has passed first_seen(T) + P, as rowlock's takes wait
// (rowlock's Failover section has the rule and why it is enough): the
// last successful ping of an old holder reached the old primary, before
// it died, before the promotion, before first_seen(T). The lock statement
// itself tells how long the pause has left (pgPauseLeft), so steady state
// costs no round trip; a paused take rolls back, records the timeline if
// it is new (pgRecordTimeline, in a statement of its own: the lock's
// transaction is rolled back), and waits (Acquire) or says not acquired
// (TryAcquire). A semaphore's take of a free slot waits for it the same
// way (its take statement, semSQL.take, answers the pause left).

// DefaultFailoverPause is how long, after a PostgreSQL promotion, no lock
// is taken (see WithFailoverPause): dblock.DefaultTTL.
const DefaultFailoverPause = dblock.DefaultTTL

// WithFailoverPause sets P, the failover pause on PostgreSQL: once the
// server's WAL timeline has changed (a standby promoted), no lock is taken
// until P after a take first saw the new timeline, by the database clock,
// and a holder gives up after 0.9·P without a successful ping (pinging
// every P/3) when its TTL is longer. So a holder of the old primary has
// stopped before anyone takes its lock on the new one. Use the same P on
// every Locker of a database (rowlock's too). 0 turns it off. Default
// DefaultFailoverPause; MySQL ignores it.
func WithFailoverPause(d time.Duration) Option { return func(c *config) { c.failoverPause = d } }

// pause is P where it applies: PostgreSQL only.
func (c *config) pause() time.Duration { return lockkit.FailoverPause(c.dialect, c.failoverPause) }

// belief is how long after its last successful ping a hold with this ttl
// trusts its lock: the TTL, or at most P (see the Failover section).
func (l *Locker) belief(ttl time.Duration) time.Duration { return lockkit.Belief(ttl, l.cfg.pause()) }

// pausedError is a lock statement's answer in the failover pause: left is
// how long the pause has left by the database clock.
type pausedError struct{ left time.Duration }

func (e *pausedError) Error() string {
	return fmt.Sprintf("forupdate: failover pause: %v left", e.left)
}

// timelinesTable records the timelines seen (migration 6).
const timelinesTable = "dblock_timelines"

// pgPauseLeft is a CTE of one row, left: the µs of failover pause left
// ($3 is P in µs): 0 when P is 0, when no timeline before the current one
// is recorded, or when P has passed since the current one was first seen;
// P when the current one is not recorded yet.
var pgPauseLeft = pgPauseLeftAt("$3")

// pgPauseLeftAt is pgPauseLeft with P in parameter param.
func pgPauseLeftAt(param string) string {
	return `pause AS (
    SELECT CASE WHEN ` + param + `::bigint = 0
                  OR NOT EXISTS (SELECT 1 FROM ` + timelinesTable + ` WHERE timeline < ` + lockkit.PgTimeline + `) THEN 0
                ELSE COALESCE((SELECT GREATEST(0, ceil(extract(epoch FROM first_seen + ` + param + `::bigint * interval '1 microsecond' - clock_timestamp()) * 1000000))::bigint
                               FROM ` + timelinesTable + ` WHERE timeline = ` + lockkit.PgTimeline + `), ` + param + `::bigint)
           END AS left_us
)`
}

// pgRecordTimeline records the current timeline, first seen now, unless it
// is recorded.
const pgRecordTimeline = `
INSERT INTO ` + timelinesTable + ` (timeline, first_seen)
SELECT ` + lockkit.PgTimeline + `, clock_timestamp()
WHERE NOT EXISTS (SELECT 1 FROM ` + timelinesTable + ` WHERE timeline = ` + lockkit.PgTimeline + `)
ON CONFLICT (timeline) DO NOTHING`

// paused answers a lock statement's token: nil for a token, and for
// -left µs (the pause is on), the timeline recorded and a *pausedError.
func (p *postgres) paused(ctx context.Context, token int64) error {
	if token >= 0 {
		return nil
	}
	if _, err := p.db.ExecContext(ctx, pgRecordTimeline); err != nil {
		return err
	}
	return &pausedError{left: time.Duration(-token) * time.Microsecond}
}

// waitPause is a lock call's answer to the failover pause: not acquired
// for a try (wait false); else it waits out left and asks for another
// attempt, unless ctx ends first.
func waitPause(ctx context.Context, wait bool, left time.Duration) (again bool, err error) {
	if !wait {
		return false, dblock.ErrNotAcquired
	}
	select {
	case <-time.After(left):
		return true, nil
	case <-ctx.Done():
		return false, errors.Join(dblock.ErrNotAcquired, ctx.Err())
	}
}
