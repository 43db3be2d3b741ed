package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/pgxrow"
)

// releaseChannel is the PostgreSQL NOTIFY channel on which releases are
// announced; the payload is the lock name.
const releaseChannel = "dblock_released"

type postgresStore struct {
	listing
	db pgxrow.DB // statements in a mode that works through poolers
	// pause is the failover pause (WithFailoverPause).
	pause time.Duration
	// process is the Locker's wake identity (newWakeID), which a waiter
	// records when it asks for a release NOTIFY and a release compares
	// with: waiters of the releasing Locker are woken in memory.
	process string
}

// pgTake takes over the name's row if its lease has lapsed (a released row
// has lapsed) or re-enters it for the same owner. The token grows by one on a
// takeover, under the row lock the UPDATE holds, so it is drawn only once the
// row is ours. It is a plain UPDATE of one row by primary key that changes
// no indexed column, so PostgreSQL can make it a HOT update (no index
// writes; the table's fillfactor leaves room on the page): that is what
// keeps it as cheap as the naive recipe's INSERT. clock_timestamp(), not
// now(): an UPDATE that waited for a releasing UPDATE's row lock rechecks
// the new row version against the time it got the lock, not the time it
// started, so it takes a lock released while it waited.
//
// A lapsed lock with live fair waiters goes only to the oldest of them:
// $7 is the caller's waiter id, or the largest bigint when not queued. The
// owner re-enters only while the lease is live: a lapsed row that still
// counts holds of the owner (an acquisition whose answer was lost, a
// release that failed) is a takeover like any other, behind the queue
// (found by the Promela model, model/mutants/reentry_after_lapse.pml).
//
// A takeover records the caller's session marker ($8, 0 for none) with the
// new token; a re-entry keeps the row's marker only if it is the caller's
// own, and else records none, so that the end of one session never cuts
// short a hold taken under another (docs/design.md, Crash detection).
//
// A takeover waits out the failover pause (pgPauseOverTake, see failover.go),
// and so does a re-entry into a row tokened on an earlier timeline: the
// promoted server may have brought it back after a release it lost.
//
// Parameters: $1 name, $2 owner_host, $3 owner_id, $4 note, $5 ttl µs,
// $6 min hold µs, $7 waiter id, $8 session key, $9 failover pause µs.
const pgTake = pgTakeSet + `WHERE l.name = $1
` + pgTakeWhere

// pgNextToken is the token of a takeover: one above the row's, and at
// least one above the current timeline's base (lockkit.PgTimelineBase), so
// that a token drawn after a promotion is above every token of the
// timeline before, replicated or not (docs/design.md, Fencing tokens
// across a failover).
const pgNextToken = `GREATEST(l.token + 1, ` + lockkit.PgTimelineBase + ` + 1)`

// pgTakeSet and pgTakeWhere are pgTake around its first condition.
const pgTakeSet = `
UPDATE ` + locksTable + ` AS l SET
    token          = CASE WHEN l.expires_at <= clock_timestamp() THEN ` + pgNextToken + ` ELSE l.token END,
    hold_count     = CASE WHEN l.expires_at <= clock_timestamp() THEN 1 ELSE l.hold_count + 1 END,
    note           = CASE WHEN l.expires_at <= clock_timestamp() THEN $4 ELSE l.note END,
    acquired_at    = CASE WHEN l.expires_at <= clock_timestamp() THEN clock_timestamp() ELSE l.acquired_at END,
    min_hold_until = CASE WHEN l.expires_at <= clock_timestamp()
                          THEN clock_timestamp() + $6::bigint * interval '1 microsecond' ELSE l.min_hold_until END,
    wanted         = CASE WHEN l.expires_at <= clock_timestamp() THEN false ELSE l.wanted END,
    session_key    = CASE WHEN l.expires_at <= clock_timestamp() OR l.session_key = $8 THEN $8 ELSE 0 END,
    session_token  = CASE WHEN l.expires_at <= clock_timestamp() THEN ` + pgNextToken + ` ELSE l.session_token END,
    owner_host     = $2,
    owner_id       = $3,
    expires_at     = GREATEST(clock_timestamp() + $5::bigint * interval '1 microsecond',
                          CASE WHEN l.expires_at > clock_timestamp() THEN l.expires_at END)
`

const pgTakeWhere = `  AND ` + pgTakeMark + `
  AND ((l.expires_at <= clock_timestamp() AND NOT EXISTS (
            SELECT 1 FROM ` + waitersTable + ` w
            WHERE w.name = $1 AND w.id < $7 AND w.expires_at > clock_timestamp())
        AND ` + pgPauseOverTake + `)
       OR (l.hold_count > 0 AND l.expires_at > clock_timestamp() AND l.owner_host = $2 AND l.owner_id = $3
           AND ` + pgPauseOverTake + `))
RETURNING l.token`

// pgTakeNowait is pgTake for a try that must not wait for another
// transaction's lock on the row (attempt.nowait): the WHERE clause, which
// PostgreSQL evaluates on the row version it sees before it asks for the
// row's lock, sets lock_timeout for the statement's own transaction, so
// that a row it would take but someone has locked (a fenced transaction
// under a lease that lapsed, a take or renewal in flight) fails it at once
// with lock_not_available (55P03) instead of waiting. A row it would not
// take is never locked, and its holder's transactions never waited for.
const pgTakeNowait = pgTakeSet + `WHERE l.name = $1
  AND set_config('lock_timeout', '1ms', true) IS NOT NULL
` + pgTakeWhere

// pgTakeBriefWait is the second try of a take that pgTakeNowait found
// locked on a row whose lease has lapsed: most likely by something brief
// (a sweep, a take or a release in flight), so it waits, but at most a
// second: a fenced transaction of a holder whose lease lapsed may be what
// holds it.
const pgTakeBriefWait = pgTakeSet + `WHERE l.name = $1
  AND set_config('lock_timeout', '1s', true) IS NOT NULL
` + pgTakeWhere

// takeMarkClass is the first key of the transaction-level advisory locks
// that mark a take in flight (pgTakeMark); the second is the hash of the
// taking owner's id. The two-key space is apart from the one-key space of
// session markers. An application lock that happens to share a key makes
// no take wait (they only try it); it can only delay a drop (dropHolds)
// until the application lets it go or the drop gives up.
const takeMarkClass = "1397836875" // "SQLK"

// pgTakeMark and pgInsertMark (the owner id is $3 in pgTake, $4 in
// pgInsert) are always true. Evaluated in the WHERE clause, which
// PostgreSQL checks on the row version it sees before it waits for that
// row's lock (and, in pgInsert, before either INSERT runs), they mark a
// take that may still commit: a drop of a cut-short take waits for the
// mark (pgAwaitTake) before it looks for a hold to undo. Waiting for the row lock alone is
// not enough: a row lock is granted to whoever asks first once its holder
// commits, and a drop can ask before a take that was woken has run again
// (TestCutShortTryLeavesNothingHeld).
const (
	pgTakeMark   = `pg_try_advisory_xact_lock(` + takeMarkClass + `, hashtext($3)) IS NOT NULL`
	pgInsertMark = `pg_try_advisory_xact_lock(` + takeMarkClass + `, hashtext($4)) IS NOT NULL`
	// pgAwaitTake: $1 owner_id.
	pgAwaitTake = `SELECT pg_advisory_xact_lock(` + takeMarkClass + `, hashtext($1))`
)

// pgInsert creates the row of a fresh name. Its token comes from the name's
// stripe counter, incremented in the same statement while its row lock is
// held, so two fresh inserts of one name (the name reaped in between) are
// ordered by token. Nothing is written when a row exists.
//
// It records the current timeline when it is new (pgRecordTimeline), and
// inserts only once the failover pause is over (see failover.go).
//
// Parameters: $1 name, $2 stripe, $3 owner_host, $4 owner_id, $5 note,
// $6 ttl µs, $7 min hold µs, $8 waiter id, $9 session key, $10 failover
// pause µs.
const pgInsert = `
WITH ` + pgRecordTimeline + `, fence AS (
    INSERT INTO ` + fencesTable + ` AS f (stripe, token)
    SELECT $2::integer, ` + lockkit.PgTimelineBase + ` + 1
    WHERE NOT EXISTS (SELECT 1 FROM ` + locksTable + ` WHERE name = $1)
      AND ` + pgInsertMark + `
      AND NOT EXISTS (SELECT 1 FROM ` + waitersTable + ` w
                      WHERE w.name = $1 AND w.id < $8 AND w.expires_at > clock_timestamp())
      AND ` + pgPauseOverFresh + `
    ON CONFLICT (stripe) DO UPDATE SET token = GREATEST(f.token + 1, ` + lockkit.PgTimelineBase + ` + 1)
    RETURNING f.token
)
INSERT INTO ` + locksTable + `
    (name, stripe, token, owner_host, owner_id, hold_count, note, acquired_at, min_hold_until, expires_at,
     session_key, session_token)
SELECT $1, $2::integer, fence.token, $3, $4, 1, $5, clock_timestamp(),
    clock_timestamp() + $7::bigint * interval '1 microsecond',
    clock_timestamp() + $6::bigint * interval '1 microsecond',
    $9, fence.token
FROM fence
ON CONFLICT (name) DO NOTHING
RETURNING token`

// tryAcquire costs one statement when it takes a name used before, and a
// second one when it does not: the name may be fresh (no row yet), held, or
// kept for older fair waiters, or its row may have just been deleted by a
// sweep (the UPDATE waited for it, then found it gone). The insert tells
// them apart with a fresh snapshot and writes nothing unless the name has
// no row. Losing the insert race means someone else has just taken it. The
// holder's remaining lease is not read: a waiter that sleeps until a
// release asks for it when it asks to be notified (wantWake).
//
// Its complexity (over 15) is the variants of one take (no wait, a brief
// wait, queued, a fresh insert) and the read of a busy row between them,
// in the order they run.
func (s postgresStore) tryAcquire(ctx context.Context, a attempt) (outcome, error) {
	var out outcome
	if a.polling {
		// A lease with time left cannot be taken by anyone else (a fresh
		// row or the owner's own re-entry are not waiters' business).
		h, found, err := s.holder(ctx, a)
		if err != nil {
			return outcome{}, err
		}
		if found && h.remaining > 0 {
			return outcome{holder: h}, nil
		}
	}
	take := pgTake
	if a.nowait {
		take = pgTakeNowait
	}
	err := s.queryInt64(ctx, &out.token, take, a.name, a.host, a.ownerID, a.note, micros(a.ttl), micros(a.minHold), a.queueID(), a.sessionKey, micros(s.pause))
	switch {
	case err == nil:
		out.acquired = true
		return out, nil
	case a.nowait && rowsBusy(err):
		// A live lease: held by someone else, not acquired.
		h, found, err := s.holder(ctx, a)
		if err != nil || (found && h.remaining > 0) {
			return outcome{}, err
		}
		err = s.queryInt64(ctx, &out.token, pgTakeBriefWait, a.name, a.host, a.ownerID, a.note, micros(a.ttl), micros(a.minHold), a.queueID(), a.sessionKey, micros(s.pause))
		switch {
		case err == nil:
			out.acquired = true
			return out, nil
		case rowsBusy(err):
			return outcome{}, nil
		case !errors.Is(err, sql.ErrNoRows):
			return outcome{}, err
		}
	case !errors.Is(err, sql.ErrNoRows):
		return outcome{}, err
	}
	err = s.queryInt64(ctx, &out.token, pgInsert,
		a.name, stripeOf(a.name), a.host, a.ownerID, a.note, micros(a.ttl), micros(a.minHold), a.queueID(), a.sessionKey, micros(s.pause))
	if errors.Is(err, sql.ErrNoRows) {
		return outcome{}, nil
	}
	if err != nil {
		return outcome{}, err
	}
	out.acquired = true
	return out, nil
}

const (
	// pgRelease drops one hold. The last one frees the row (expires_at =
	// now), or, with MinHold pending, leaves it to lapse at min_hold_until.
	// A freed lock is announced to the listeners of other processes when a
	// waiter of another process than this one ($5) asked for it (pgWant):
	// NOTIFY serializes committing transactions and, with a session
	// listening, made the release take twice as long, so a release whose
	// only waiters are in its own process (woken in memory) does without.
	//
	// The release commits without waiting for its WAL to reach disk:
	// set_config(..., true) turns synchronous_commit off for the
	// statement's own transaction only, which is committed after the
	// RETURNING list has run, so it is in effect at the commit and gone
	// after it (also behind a transaction pooler). See docs/design.md,
	// "Releases that do not wait for the disk", for why that is safe; the
	// statements that take locks and draw tokens never do it.
	pgRelease = `
UPDATE ` + locksTable + `
SET hold_count = hold_count - 1,
    expires_at = CASE WHEN hold_count = 1 THEN GREATEST(min_hold_until, clock_timestamp()) ELSE expires_at END
WHERE name = $1 AND owner_host = $2 AND owner_id = $3 AND token = $4 AND hold_count > 0
RETURNING set_config('synchronous_commit', 'off', true),
    CASE WHEN wanted AND wanted_by <> $5 AND hold_count = 0 AND expires_at <= clock_timestamp()
         THEN pg_notify('` + releaseChannel + `', name) END`

	// pgWant asks the holder's release for a NOTIFY, for this process ($2)
	// or, when another process asked already, for several (''). It succeeds
	// only while the lock is held; the row lock it takes orders it before
	// that release. A takeover clears wanted, so a stale wanted_by is
	// never read.
	pgWant = `
UPDATE ` + locksTable + ` SET wanted = true,
    wanted_by = CASE WHEN wanted AND wanted_by <> $2 THEN '' ELSE $2 END
WHERE name = $1 AND expires_at > clock_timestamp()
RETURNING ` + pgHolderColumns

	// pgHolderColumns are a waiter's holderInfo: the lease left in µs, the
	// holder's session marker if trusted (see pgTake), and the token.
	pgHolderColumns = `GREATEST(0, (extract(epoch FROM expires_at - clock_timestamp()) * 1000000)::bigint),
    CASE WHEN session_token = token THEN session_key ELSE 0 END, token`

	// pgHolder reads a name's holder without writing (a polling waiter).
	// A hold of the caller's own owner ($2, $3) counts as no lease left:
	// the owner re-enters (see myRemaining).
	pgHolder = `
SELECT CASE WHEN hold_count > 0 AND owner_host = $2 AND owner_id = $3 THEN 0
            ELSE GREATEST(0, (extract(epoch FROM expires_at - clock_timestamp()) * 1000000)::bigint) END,
    CASE WHEN session_token = token THEN session_key ELSE 0 END, token
FROM ` + locksTable + ` WHERE name = $1`

	// pgShorten ends the lease of a holder whose session marker is gone at
	// most $4 µs from now, never before its MinHold; see store.shorten.
	pgShorten = `
UPDATE ` + locksTable + `
SET expires_at = LEAST(expires_at, GREATEST(min_hold_until, clock_timestamp() + $4::bigint * interval '1 microsecond'))
WHERE name = $1 AND token = $2 AND session_key = $3 AND session_token = token
  AND expires_at > clock_timestamp()`

	// pgRenew never shortens the lease: reentrant holds share the row, and
	// a short inner hold's renewal must not cut the lease of a longer
	// outer one. It never revives a lapsed one either.
	pgRenew = `
UPDATE ` + locksTable + `
SET expires_at = GREATEST(expires_at, clock_timestamp() + $5::bigint * interval '1 microsecond')
WHERE name = $1 AND owner_host = $2 AND owner_id = $3 AND token = $4 AND hold_count > 0
  AND expires_at > clock_timestamp()`

	pgCheckHeld = `
SELECT 1 FROM ` + locksTable + `
WHERE name = $1 AND owner_host = $2 AND owner_id = $3 AND token = $4
  AND hold_count > 0 AND expires_at > clock_timestamp()
FOR SHARE`

	// pgSweep looks at the next $2 rows after $3 in name order and deletes
	// those whose lease lapsed more than $1 µs ago, raising their stripes'
	// counters to their tokens in the same statement. It walks the primary
	// key, so dblock_locks needs no index on expires_at (which would make
	// every take and release a non-HOT update, see pgTake), and a whole
	// sweep reads each row once. FOR UPDATE rechecks the lapse on the newest
	// row version; rows an acquirer is taking over are skipped.
	pgSweep = `
WITH scanned AS (
    SELECT name, expires_at FROM ` + locksTable + `
    WHERE name > $3
    ORDER BY name
    LIMIT $2
), doomed AS (
    SELECT l.name FROM ` + locksTable + ` AS l
    WHERE l.name IN (SELECT name FROM scanned
                     WHERE expires_at < clock_timestamp() - $1::bigint * interval '1 microsecond')
      AND l.expires_at < clock_timestamp() - $1::bigint * interval '1 microsecond'
    FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM ` + locksTable + ` AS l USING doomed
    WHERE l.name = doomed.name
    RETURNING l.stripe, l.token
), fenced AS (
    INSERT INTO ` + fencesTable + ` AS f (stripe, token)
    SELECT stripe, max(token) FROM deleted GROUP BY stripe
    ON CONFLICT (stripe) DO UPDATE SET token = GREATEST(f.token, EXCLUDED.token)
)
SELECT (SELECT count(*) FROM deleted), (SELECT count(*) FROM scanned),
       COALESCE((SELECT name FROM scanned ORDER BY name DESC LIMIT 1), '')`
)

// release is an Exec, not a query: database/sql starts a goroutine for the
// rows of every query whose context can be canceled (see queryInt64), and
// the statement's row says no more than the rows affected. RETURNING sees
// the row as updated, and NOTIFY is sent only if the release commits.
func (s postgresStore) release(ctx context.Context, h holder) (bool, error) {
	return execOne(ctx, s.db, pgRelease, h.name, h.host, h.ownerID, h.token, s.process)
}

// queryInt64 runs a statement that returns at most one bigint into dst;
// sql.ErrNoRows when it returns none. With a context that can be canceled
// it runs through pgx itself when the driver is pgx's (see package
// pgxrow): database/sql would start a goroutine for its row.
func (s postgresStore) queryInt64(ctx context.Context, dst *int64, query string, args ...any) error {
	if ctx.Done() == nil {
		// Nothing to watch: database/sql starts no goroutine either.
		return s.db.QueryRowContext(ctx, query, args...).Scan(dst)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if ok, err := s.db.Scan(ctx, conn, query, args, dst); ok {
		return err
	}
	return conn.QueryRowContext(ctx, query, args...).Scan(dst)
}

func (s postgresStore) dropHolds(ctx context.Context, name string, o dblock.Owner) error {
	return dropHoldsLocked(ctx, s.db, pgAwaitTake, `SELECT 1 FROM `+locksTable+` WHERE name = $1 FOR UPDATE`, pgDropHolds, name, o)
}

func (s postgresStore) renew(ctx context.Context, h holder, ttl time.Duration) (bool, error) {
	return execOne(ctx, s.db, pgRenew, h.name, h.host, h.ownerID, h.token, micros(ttl))
}

func (s postgresStore) checkHeld(ctx context.Context, tx *sql.Tx, h holder) (bool, error) {
	return queryOne(ctx, s.db.On(tx), pgCheckHeld, h.name, h.host, h.ownerID, h.token)
}

func (s postgresStore) sweep(ctx context.Context, grace time.Duration, limit int, after string) (sweepBatch, error) {
	var b sweepBatch
	err := s.db.QueryRowContext(ctx, pgSweep, micros(grace), limit, after).Scan(&b.deleted, &b.scanned, &b.last)
	return b, err
}

func (postgresStore) close() {}
