package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/pgxrow"
	"github.com/sqllock/sqllock/internal/stmtcache"
	"github.com/sqllock/sqllock/internal/wake"
)

type mysqlStore struct {
	listing
	db *sql.DB
	// hot runs the statements of every acquire and release prepared.
	hot *stmtcache.Cache
	// process is the Locker's wake identity (newWakeID): it tells this
	// Locker's requests for a ring from others'.
	process string
	// ring asks the Locker's session to ring its doorbell (bell.go): a
	// release found that a waiter of another Locker asked for it.
	ring func()
	// noSetStatement is set once the server refused SET STATEMENT (MySQL
	// has it not; MariaDB has): see take.
	noSetStatement *atomic.Bool
	// galera is whether the server is a Galera node (cluster.go).
	galera *wake.Cluster
}

// nowaitPrefix runs a take without waiting for row locks (attempt.nowait):
// MariaDB's per-statement setting, a lock wait timeout of 0, fails the
// statement with 1205 at once when another transaction holds the row it
// would lock. MySQL has neither SET STATEMENT nor a per-statement hint for
// innodb_lock_wait_timeout; there a try reads the row first (a plain read
// waits for no lock) and does not try a lease with time left, so only a
// row whose lease lapsed under an open transaction (a paused holder's
// fenced transaction) makes it wait, for at most innodb_lock_wait_timeout.
const nowaitPrefix = "SET STATEMENT innodb_lock_wait_timeout = 0 FOR "

// briefWaitPrefix is the second try of a take that nowaitPrefix found
// locked on a row whose lease has lapsed: most likely by something brief
// (a sweep deleting the row, a take or a release in flight), so it waits,
// but only a second (MariaDB counts whole seconds): a fenced transaction
// of a holder whose lease lapsed may be what holds it.
const briefWaitPrefix = "SET STATEMENT innodb_lock_wait_timeout = 1 FOR "

// take runs one of the take statements, as a try that does not wait for
// row locks when a.nowait; busy reports a statement that would have.
func (s mysqlStore) take(ctx context.Context, a attempt, query string, args ...any) (res sql.Result, busy bool, err error) {
	if a.nowait && !s.noSetStatement.Load() {
		res, err = s.hot.ExecContext(ctx, nowaitPrefix+query, args...)
		var myErr *mysql.MySQLError
		switch {
		case rowsBusy(err):
			// A live lease: held by someone else, not acquired.
			h, err := scanHolder(s.hot.QueryRowContext(ctx, myRemaining, a.host, a.ownerID, a.name))
			if err == nil && h.remaining > 0 {
				return nil, true, nil
			}
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, false, err
			}
			res, err = s.hot.ExecContext(ctx, briefWaitPrefix+query, args...)
			return res, rowsBusy(err), err
		case !errors.As(err, &myErr) || myErr.Number != 1064: // ER_PARSE_ERROR: not MariaDB
			return res, false, err
		}
		s.noSetStatement.Store(true)
	}
	res, err = s.hot.ExecContext(ctx, query, args...)
	return res, a.nowait && rowsBusy(err), err
}

// waitersByName makes the waiter subqueries use the (name, id) index.
// Without it MariaDB plans "w.name = ? AND w.id < ?" as a range scan of the
// primary key, and with the id of an unqueued acquirer (the largest
// bigint) that reads every waiter row of every name, on every acquire.
const waitersByName = ` FORCE INDEX (dblock_waiters_name_id)`

const (
	// myTake takes over the name's row if its lease has lapsed (a released
	// row has lapsed) or re-enters it for the same owner; the token grows by
	// one on a takeover, under the row lock the UPDATE holds.
	// LAST_INSERT_ID(expr) hands the token back in the OK packet (MySQL 8.0
	// has no RETURNING). MySQL assigns left to right, each assignment seeing
	// the ones before: "lapsed" reads only expires_at, which is assigned
	// last. UTC_TIMESTAMP(6) is fixed for the statement.
	//
	// A lapsed lock with live fair waiters goes only to the oldest of them.
	// dblock_locks has no index on expires_at, so no index is written.
	//
	// A takeover records the caller's session marker with the new token
	// (token is assigned first, so it reads the new value); a re-entry keeps
	// the row's marker only if it is the caller's own (see pgTake).
	//
	// A takeover also clears queued when no waiter row other than the
	// taker's own is left for the name (see myTakeFast).
	//
	// Parameters: note, min hold µs, host, owner, session key, session key,
	// name, waiter id, ttl µs, ttl µs, name, name, waiter id, host, owner.
	myTake = `
UPDATE ` + locksTable + ` SET
    token = LAST_INSERT_ID(IF(expires_at <= UTC_TIMESTAMP(6), token + 1, token)),
    note = IF(expires_at <= UTC_TIMESTAMP(6), ?, note),
    acquired_at = IF(expires_at <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), acquired_at),
    min_hold_until = IF(expires_at <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, min_hold_until),
    hold_count = IF(expires_at <= UTC_TIMESTAMP(6), 1, hold_count + 1),
    owner_host = ?,
    owner_id = ?,
    session_token = IF(expires_at <= UTC_TIMESTAMP(6), token, session_token),
    session_key = IF(expires_at <= UTC_TIMESTAMP(6) OR session_key = ?, ?, 0),
    queued = IF(expires_at <= UTC_TIMESTAMP(6), EXISTS (
            SELECT 1 FROM ` + waitersTable + ` w` + waitersByName + ` WHERE w.name = ? AND w.id <> ?), queued),
    expires_at = IF(expires_at <= UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
        GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND))
WHERE name = ?
  AND ((expires_at <= UTC_TIMESTAMP(6) AND NOT EXISTS (
            SELECT 1 FROM ` + waitersTable + ` w` + waitersByName + `
            WHERE w.name = ? AND w.id < ? AND w.expires_at > UTC_TIMESTAMP(6)))
       OR (hold_count > 0 AND expires_at > UTC_TIMESTAMP(6) AND owner_host = ? AND owner_id = ?))`

	// myTakeFast is myTake's takeover for an unqueued contender, with
	// neither the fair queue's subquery, which MariaDB plans on every
	// execution whether or not it runs (a tenth of an uncontended acquire
	// and release), nor the re-entry branch. It takes the row only when
	// queued is false, which proves that no fair waiter row exists for the
	// name: a fair waiter sets queued, holding the row's lock, before it
	// inserts its row, in one transaction (package queue); queued is
	// cleared only by myTake, holding the row's lock, when it finds no
	// waiter row but the taker's; and a row is created queued. Anything
	// else (re-entry, a queue, a held or fresh name) falls back to myTake.
	// Parameters: note, min hold µs, host, owner, session key, ttl µs, name.
	myTakeFast = `
UPDATE ` + locksTable + ` SET
    token = LAST_INSERT_ID(token + 1),
    note = ?,
    acquired_at = UTC_TIMESTAMP(6),
    min_hold_until = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND,
    hold_count = 1,
    owner_host = ?,
    owner_id = ?,
    session_token = token,
    session_key = ?,
    expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE name = ? AND expires_at <= UTC_TIMESTAMP(6) AND NOT queued`

	// myRemaining is a waiter's holderInfo: the lease left in µs, the
	// holder's session marker if trusted, and the token. A hold of the
	// caller's own owner counts as no lease left: the owner re-enters (two
	// goroutines of one owner may race to insert a fresh name's row, and
	// the loser must not wait for the winner).
	// Parameters: host, owner, name.
	myRemaining = `
SELECT IF(hold_count > 0 AND owner_host = ? AND owner_id = ?, 0,
          GREATEST(0, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at))),
    IF(session_token = token, session_key, 0), token
FROM ` + locksTable + ` WHERE name = ?`

	// myShorten ends the lease of a holder whose session marker is gone at
	// most grace from now, never before its MinHold; see store.shorten.
	// Parameters: grace µs, name, token, key.
	myShorten = `
UPDATE ` + locksTable + `
SET expires_at = LEAST(expires_at, GREATEST(min_hold_until, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND))
WHERE name = ? AND token = ? AND session_key = ? AND session_token = token
  AND expires_at > UTC_TIMESTAMP(6)`

	// myDrawToken increments the stripe counter; its row lock, held until
	// the transaction ends, orders fresh inserts of names on the stripe.
	myDrawToken = `
INSERT INTO ` + fencesTable + ` (stripe, token) VALUES (?, LAST_INSERT_ID(1))
ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)`

	myInsert = `
INSERT INTO ` + locksTable + `
    (name, stripe, token, owner_host, owner_id, hold_count, note, acquired_at, min_hold_until, expires_at,
     session_key, session_token)
SELECT ?, ?, ?, ?, ?, 1, ?, UTC_TIMESTAMP(6),
    UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?, ?
FROM DUAL
WHERE NOT EXISTS (SELECT 1 FROM ` + waitersTable + ` w` + waitersByName + `
                  WHERE w.name = ? AND w.id < ? AND w.expires_at > UTC_TIMESTAMP(6))`

	// expires_at and wanted are assigned before hold_count so they read
	// the old count. The last release hands back, as LAST_INSERT_ID, 1
	// when a waiter of another process than this one asked for a ring
	// (myArm), and clears wanted; any other release hands back 0 (MySQL
	// reports the argument of LAST_INSERT_ID(expr) as the statement's
	// insert id, and 0 when the statement evaluated none).
	// Parameters: process, name, host, owner, token.
	myRelease = `
UPDATE ` + locksTable + `
SET expires_at = IF(hold_count = 1, GREATEST(min_hold_until, UTC_TIMESTAMP(6)), expires_at),
    wanted = IF(hold_count = 1, LAST_INSERT_ID(wanted AND wanted_by <> ?) AND FALSE, wanted),
    hold_count = hold_count - 1
WHERE name = ? AND owner_host = ? AND owner_id = ? AND token = ? AND hold_count > 0`

	// myRenew never shortens the lease (see pgRenew) nor revives a lapsed
	// one. When the lease already reaches further it changes nothing, and
	// MySQL then reports 0 affected rows: myHeld tells that case apart.
	myRenew = `
UPDATE ` + locksTable + `
SET expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
WHERE name = ? AND owner_host = ? AND owner_id = ? AND token = ? AND hold_count > 0
  AND expires_at > UTC_TIMESTAMP(6)`

	myHeld = `
SELECT 1 FROM ` + locksTable + `
WHERE name = ? AND owner_host = ? AND owner_id = ? AND token = ?
  AND hold_count > 0 AND expires_at > UTC_TIMESTAMP(6)`

	// LOCK IN SHARE MODE rather than FOR SHARE: MariaDB has only the former.
	myCheckHeld = `
SELECT 1 FROM ` + locksTable + `
WHERE name = ? AND owner_host = ? AND owner_id = ? AND token = ?
  AND hold_count > 0 AND expires_at > UTC_TIMESTAMP(6)
LOCK IN SHARE MODE`

	// mySweepScan looks at the next rows in name order without locking
	// them: walking the primary key needs no index on expires_at (which
	// would cost every take and release an index write) and reads each row
	// once per sweep. The lapsed ones are then locked by mySweepLock, which
	// rechecks the lapse on the newest row version and skips rows an
	// acquirer is taking over.
	mySweepScan = `
SELECT name, expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND FROM ` + locksTable + `
WHERE name > ?
ORDER BY name
LIMIT ?`
	mySweepLock = `
SELECT name, stripe, token FROM ` + locksTable + `
WHERE expires_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND AND name IN (%s)
FOR UPDATE SKIP LOCKED`

	// myFenceUpsert raises stripes' counters (see deleteDoomed).
	myFenceUpsert = `INSERT INTO ` + fencesTable + ` (stripe, token) VALUES %s
ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token))`
)

func (s mysqlStore) tryAcquire(ctx context.Context, a attempt) (outcome, error) {
	if a.polling || (a.nowait && s.noSetStatement.Load()) {
		// A lease with time left cannot be taken by anyone else (a fresh
		// row or the owner's own re-entry are not waiters' business).
		h, err := scanHolder(s.hot.QueryRowContext(ctx, myRemaining, a.host, a.ownerID, a.name))
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return outcome{}, err
		}
		if err == nil && h.remaining > 0 {
			return outcome{holder: h}, nil
		}
	}
	ttl, minHold := micros(a.ttl), micros(a.minHold)
	if a.waiterID == 0 {
		res, busy, err := s.take(ctx, a, myTakeFast, a.note, minHold, a.host, a.ownerID, a.sessionKey, ttl, a.name)
		if out, done, err := tookOne(res, busy, err); done {
			return out, err
		}
	}
	res, busy, err := s.take(ctx, a, myTake,
		a.note, minHold, a.host, a.ownerID, a.sessionKey, a.sessionKey, a.name, a.queueID(),
		ttl, ttl, a.name, a.name, a.queueID(), a.host, a.ownerID)
	if out, done, err := tookOne(res, busy, err); done {
		return out, err
	}
	h, err := scanHolder(s.hot.QueryRowContext(ctx, myRemaining, a.host, a.ownerID, a.name))
	if err == nil {
		return outcome{holder: h}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return outcome{}, err
	}
	return s.insert(ctx, a)
}

// tookOne reads the answer of a take statement (take's res, busy, err):
// done when it settles the try, that is when the row was busy (not
// acquired), the statement failed, or it changed the row (acquired, with
// the token it left in LAST_INSERT_ID); not done when it changed nothing.
func tookOne(res sql.Result, busy bool, err error) (_ outcome, done bool, _ error) {
	switch {
	case busy:
		return outcome{}, true, nil
	case err != nil:
		return outcome{}, true, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 1 {
		token, idErr := res.LastInsertId()
		return outcome{acquired: err == nil && idErr == nil, token: token}, true, errors.Join(err, idErr)
	}
	return outcome{}, false, nil
}

// insert creates the row of a fresh name in a transaction that first draws
// its token from the stripe counter.
func (s mysqlStore) insert(ctx context.Context, a attempt) (out outcome, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return outcome{}, err
	}
	defer func() {
		if !out.acquired {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	stripe := stripeOf(a.name)
	res, err := tx.ExecContext(ctx, myDrawToken, stripe)
	if err != nil {
		return outcome{}, err
	}
	token, err := res.LastInsertId()
	if err != nil {
		return outcome{}, err
	}
	res, err = tx.ExecContext(ctx, myInsert,
		a.name, stripe, token, a.host, a.ownerID, a.note, micros(a.minHold), micros(a.ttl), a.sessionKey, token, a.name, a.queueID())
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) && myErr.Number == 1062 {
		// Someone created the row since we looked: they hold it now.
		return outcome{}, nil
	}
	if err != nil {
		return outcome{}, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		// Older fair waiters are queued for the name.
		return outcome{}, err
	}
	if err := tx.Commit(); err != nil {
		return outcome{}, err
	}
	return outcome{acquired: true, token: token}, nil
}

func (s mysqlStore) release(ctx context.Context, h holder) (bool, error) {
	res, err := s.hot.ExecContext(ctx, myRelease, s.process, h.name, h.host, h.ownerID, h.token)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return false, err
	}
	if wanted, err := res.LastInsertId(); err == nil && wanted == 1 && s.ring != nil {
		s.ring()
	}
	return true, nil
}

func (s mysqlStore) dropHolds(ctx context.Context, name string, o dblock.Owner) error {
	return dropHoldsLocked(ctx, pgxrow.Wrap(s.db), "", `SELECT 1 FROM `+locksTable+` WHERE name = ? FOR UPDATE`, myDropHolds, name, o)
}

// renew runs in a transaction although it is one statement: when ctx ends
// while the UPDATE waits for a row lock, go-sql-driver closes the connection
// but the server runs the statement once the lock comes free. Inside a
// transaction that late renewal is rolled back with the dead session instead
// of reviving a lease its holder already declared lost (UTC_TIMESTAMP is
// fixed when the statement starts, so the WHERE clause cannot tell).
func (s mysqlStore) renew(ctx context.Context, h holder, ttl time.Duration) (ok bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	ok, err = execOne(ctx, tx, myRenew, micros(ttl), h.name, h.host, h.ownerID, h.token)
	if err == nil && !ok {
		// Nothing changed: the lease was not ours, had lapsed, or already
		// reached past now+ttl (a longer reentrant hold). The UPDATE has
		// locked the row if it matched, so this read settles which.
		ok, err = queryOne(ctx, tx, myHeld, h.name, h.host, h.ownerID, h.token)
	}
	if err != nil {
		return false, errors.Join(err, ignoreDone(tx.Rollback()))
	}
	return ok, tx.Commit()
}

func (s mysqlStore) checkHeld(ctx context.Context, tx *sql.Tx, h holder) (bool, error) {
	galera, err := s.galera.Is(ctx, tx)
	if err != nil {
		return false, err
	}
	if galera {
		return execOne(ctx, tx, myCheckHeldWrite, h.name, h.host, h.ownerID, h.token)
	}
	return queryOne(ctx, tx, myCheckHeld, h.name, h.host, h.ownerID, h.token)
}

func (s mysqlStore) close() { s.hot.Close() }
