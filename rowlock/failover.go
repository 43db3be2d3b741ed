package rowlock

import (
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// # Failover
//
// A PostgreSQL primary with an asynchronous standby acknowledges commits
// the standby may never receive. When the primary dies and the standby is
// promoted, the lock rows of the last takes and renewals can be missing
// there, or show an older lease. A holder whose take or renewal was
// acknowledged believes it holds until its deadline, while on the
// promoted server its row is free. Session markers end such a holder
// soon (its session is gone), but a holder without one (WithCrashGrace(0),
// a pooler, lib/pq) is stopped by its deadline alone. So, after a change
// of timeline, no one takes a lock before every such deadline has passed:
// the failover pause.
//
// The rule. Let T be the server's current WAL timeline
// (lockkit.PgTimeline), read in the statement that takes, and
// dblock_timelines the timelines seen so far (migration 6 records the
// one it runs on as seen since forever). A take of a lock (a fresh row,
// or the takeover of a lapsed one; for every kind, all of which take
// through pgTake and pgInsert) succeeds only if
//
//   - P is 0 (WithFailoverPause(0): no pause), or
//   - for a takeover, the row's token was drawn on T or later (its
//     timeline bits, lockkit.TimelineShift): a take on T drew it, which
//     this rule let through, so the pause on T is over; or
//   - for a fresh row, no timeline below T is recorded: nothing on the
//     server says an earlier primary handed out locks; or
//   - T is recorded, first seen at first_seen(T), and the database clock
//     has passed first_seen(T) + P.
//
// The second case keeps the hot path (a takeover of a row taken on the
// current timeline) free of the table: one comparison in the statement.
// It relies on every Locker of the database having the same P, as the
// pause's argument does anyway.
//
// The insert of a fresh row (pgInsert, which every take that did not
// succeed at once runs) records T with the statement's clock when it is
// missing, whether or not it takes: the first take on a new timeline is
// refused and starts the pause. Renewals are never paused: they extend
// only a live lease with the holder's token. A re-entry by the row's owner
// into its own live lease is paused like a takeover unless the row's
// token was drawn on T. The promoted server can bring back a row whose
// release it lost: p released (acknowledged, not replicated), q took the
// lock over (the same) and believes it holds it, and on the new primary
// the row is p's again, live. p's re-entry would then make p and q both
// holders. The spin model found this (model/README.md, Findings;
// model/mutants/failover_reentry.pml), and TestFailoverPauseRule checks
// it. A holder's own re-entries into such a row wait, for at most P.
//
// Why it is enough. A holder believes it holds until its deadline: the
// send time of its last successful take or renewal, plus its belief B
// less a tenth (Lock's deadline), by its monotonic clock. With the pause
// on, B is min(TTL, P) (Locker.belief): a holder whose TTL is longer
// renews every P/3 and gives up after 0.9·P without a renewal, though the
// row's lease stays its TTL. The statement whose acknowledgement set that
// deadline was committed by the old primary, so sent before it died; the
// old primary died before the standby was promoted (what every failover
// manager ensures: a primary still taking writes after a promotion is a
// split brain, which no lock in the database survives); the promotion
// came before any statement ran on T, and first_seen(T) is read by such
// a statement. So deadline ≤ sent + 0.9·P < first_seen(T) + P: the holder
// has stopped before anyone takes on T. The tenth covers the holder's
// clock running slower than the server's. A holder whose renewal reaches
// the promoted server and succeeds finds its row there, live with its
// token: nobody could take it meanwhile, and it goes on holding. A holder
// of a lost row fails its next renewal and says so, or reaches its
// deadline.
//
// Timelines, not replication settings, decide: a synchronous standby loses
// no acknowledged commit, and leases alone would do there, but nothing the
// promoted server can read says the old one was synchronous (the setting
// is the primary's, and can change). A planned switchover is a new
// timeline too, and pauses as a failover does.
//
// The cost. After every promotion, no lock is taken for P (default
// DefaultFailoverPause, the default TTL: as long as a crashed holder
// without a marker blocks its lock): Acquire waits, TryAcquire says not
// acquired. Holders of a lock whose row was replicated keep it throughout.
// Holders with a TTL above P renew every P/3 instead of TTL/3. Steady
// state costs a comparison per takeover and a probe of a table of a few
// rows per fresh row, in the take's own statement (no round trip): see
// docs/failover.md for the figures, measured with bench.
//
// TestFailoverPause (internal/failover) kills an asynchronous primary
// under workers of every kind and checks, by the holders' own clocks and
// by a fenced ledger, that no two hold at once; it fails with the pause
// off.

// DefaultFailoverPause is how long, after a PostgreSQL promotion, no lock
// is taken (see WithFailoverPause): dblock.DefaultTTL.
const DefaultFailoverPause = dblock.DefaultTTL

// WithFailoverPause sets P, the failover pause on PostgreSQL: once the
// server's WAL timeline has changed (a standby promoted), no lock is taken
// until P after a take first saw the new timeline, by the database clock;
// and a holder believes in its lock for at most P (less a tenth) after its
// last successful renewal, so a holder with a TTL above P renews every
// P/3. So a holder whose last renewals were lost with the old primary has
// stopped before anyone takes its lock on the new one (see the package
// doc's Failover section). Every Locker on a database should use the same
// P: a take waits for its own P, and protects holders whose P is at most
// as long. 0 turns the pause off: after an asynchronous failover, two
// holders may then overlap for up to a TTL. Default DefaultFailoverPause;
// other dialects ignore it.
func WithFailoverPause(d time.Duration) Option {
	return func(c *config) { c.failoverPause = d }
}

// pause is P where it applies: PostgreSQL only.
func (c *config) pause() time.Duration { return lockkit.FailoverPause(c.dialect, c.failoverPause) }

// belief is how long after a successful take or renewal a hold with this
// ttl believes in it without another: its TTL, or at most P on
// PostgreSQL with the pause on (see the Failover section).
func (l *Locker) belief(ttl time.Duration) time.Duration { return lockkit.Belief(ttl, l.cfg.pause()) }

// timelinesTable records the timelines seen (migration 6).
const timelinesTable = "dblock_timelines"

// pgNoEarlierTimeline: no timeline below T is recorded.
const pgNoEarlierTimeline = `NOT EXISTS (SELECT 1 FROM ` + timelinesTable + ` WHERE timeline < ` + lockkit.PgTimeline + `)`

// pgPauseOverTake is the rule for pgTake's takeover of row l, P in µs
// being its $9; pgPauseOverFresh for pgInsert's fresh row, P its $10.
const (
	pgPauseOverTake = `($9::bigint = 0
       OR (l.token >> 40) >= ` + lockkit.PgTimeline + `
       OR ` + pgPausePassedTake + `)`
	pgPausePassedTake = `EXISTS (SELECT 1 FROM ` + timelinesTable + ` WHERE timeline = ` + lockkit.PgTimeline + `
                  AND first_seen + $9::bigint * interval '1 microsecond' <= clock_timestamp())`
	pgPauseOverFresh = `($10::bigint = 0
       OR ` + pgNoEarlierTimeline + `
       OR ` + pgPausePassedFresh + `)`
	pgPausePassedFresh = `EXISTS (SELECT 1 FROM ` + timelinesTable + ` WHERE timeline = ` + lockkit.PgTimeline + `
                  AND first_seen + $10::bigint * interval '1 microsecond' <= clock_timestamp())`
)

// pgRecordTimeline is a CTE that records the current timeline, first seen
// now, unless it is recorded. The statement it is part of does not see
// the row it inserts: its own take is judged without it.
const pgRecordTimeline = `timeline AS (
    INSERT INTO ` + timelinesTable + ` (timeline, first_seen)
    SELECT ` + lockkit.PgTimeline + `, clock_timestamp()
    WHERE NOT EXISTS (SELECT 1 FROM ` + timelinesTable + ` WHERE timeline = ` + lockkit.PgTimeline + `)
    ON CONFLICT (timeline) DO NOTHING
)`
