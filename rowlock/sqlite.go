package rowlock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// sqliteStore is the store on SQLite. SQLite lets one connection write the
// file at a time, and a statement that writes takes that write lock before
// it reads a row: each single statement below is atomic without row locks,
// and waits its turn for the busy timeout the DSN sets (checked once, see
// sqliteReady). The one read-then-write sequence (the sweep) runs in a
// BEGIN IMMEDIATE transaction, which takes the write lock when it begins:
// a deferred one would fail with SQLITE_BUSY, without waiting, when it
// turns from reader into writer after another connection wrote.
//
// Times are integer µs since the Unix epoch, from the database's clock,
// which SQLite holds fixed for one statement; it has millisecond resolution.
// SQLite has no sessions and no notifications: the Locker runs on leases
// alone and its waiters poll.
type sqliteStore struct {
	listing
	db    *sql.DB
	ready *sqliteReady
	// turn queues the Locker's own writers, first come first served: the
	// busy timeout's waiting is a sleep-and-retry that serves nobody in
	// order, and under a stream of writes (a sweep in a loop, many
	// acquirers) a renewal could miss its deadline. Writers of other
	// processes still meet the busy timeout.
	turn chan struct{}
}

// sqNow is the database clock in µs since the epoch.
const sqNow = `CAST(unixepoch('subsec') * 1000000 AS INTEGER)`

// sqLapsed tells a row whose lease has lapsed.
const sqLapsed = `expires_at <= ` + sqNow

// sqNoOlderWaiter: no live fair waiter of ?1 older than the id ?2.
const sqNoOlderWaiter = `NOT EXISTS (SELECT 1 FROM ` + waitersTable + ` w
    WHERE w.name = ?1 AND w.id < ?2 AND w.expires_at > ` + sqNow + `)`

const (
	// sqTake takes over a lapsed row or re-enters a live one for the same
	// owner, as pgTake does (every SET expression reads the row before the
	// UPDATE). There are no session markers: session_key stays 0.
	// Parameters: ?1 name, ?2 waiter id, ?3 host, ?4 owner, ?5 note,
	// ?6 ttl µs, ?7 min hold µs.
	sqTake = `
UPDATE ` + locksTable + ` SET
    token          = CASE WHEN ` + sqLapsed + ` THEN token + 1 ELSE token END,
    hold_count     = CASE WHEN ` + sqLapsed + ` THEN 1 ELSE hold_count + 1 END,
    note           = CASE WHEN ` + sqLapsed + ` THEN ?5 ELSE note END,
    acquired_at    = CASE WHEN ` + sqLapsed + ` THEN ` + sqNow + ` ELSE acquired_at END,
    min_hold_until = CASE WHEN ` + sqLapsed + ` THEN ` + sqNow + ` + ?7 ELSE min_hold_until END,
    session_token  = CASE WHEN ` + sqLapsed + ` THEN token + 1 ELSE session_token END,
    session_key    = 0,
    owner_host     = ?3,
    owner_id       = ?4,
    expires_at     = max(` + sqNow + ` + ?6, CASE WHEN ` + sqLapsed + ` THEN 0 ELSE expires_at END)
WHERE name = ?1
  AND ((` + sqLapsed + ` AND ` + sqNoOlderWaiter + `)
       OR (hold_count > 0 AND expires_at > ` + sqNow + ` AND owner_host = ?3 AND owner_id = ?4))
RETURNING token`

	// sqInsert creates the row of a fresh name, its token one above its
	// stripe's counter. Writers are serialized, so nothing can come
	// between reading the counter and inserting; the counter only needs
	// raising when rows are deleted (sqRaiseFences). Nothing is written
	// when the row exists or older fair waiters are queued.
	// Parameters: ?1 name, ?2 waiter id, ?3 host, ?4 owner, ?5 note,
	// ?6 ttl µs, ?7 min hold µs, ?8 stripe.
	sqInsert = `
INSERT INTO ` + locksTable + `
    (name, stripe, token, owner_host, owner_id, hold_count, note, acquired_at, min_hold_until, expires_at,
     session_key, session_token)
SELECT ?1, ?8, f.token, ?3, ?4, 1, ?5, ` + sqNow + `, ` + sqNow + ` + ?7, ` + sqNow + ` + ?6, 0, f.token
FROM (SELECT coalesce((SELECT token FROM ` + fencesTable + ` WHERE stripe = ?8), 0) + 1 AS token) f
WHERE ` + sqNoOlderWaiter + `
ON CONFLICT (name) DO NOTHING
RETURNING token`

	// sqRemaining is a waiter's holderInfo (see myRemaining).
	// Parameters: ?1 host, ?2 owner, ?3 name.
	sqRemaining = `
SELECT CASE WHEN hold_count > 0 AND owner_host = ?1 AND owner_id = ?2 THEN 0
            ELSE max(0, expires_at - ` + sqNow + `) END, 0, token
FROM ` + locksTable + ` WHERE name = ?3`

	sqHolder = ` WHERE name = ?1 AND owner_host = ?2 AND owner_id = ?3 AND token = ?4 AND hold_count > 0`

	sqRelease = `
UPDATE ` + locksTable + `
SET hold_count = hold_count - 1,
    expires_at = CASE WHEN hold_count = 1 THEN max(min_hold_until, ` + sqNow + `) ELSE expires_at END` + sqHolder

	// sqRenew never shortens the lease nor revives a lapsed one. SQLite
	// counts every row an UPDATE matches as changed, so a lease that
	// already reaches further still reports the row.
	sqRenew = `
UPDATE ` + locksTable + `
SET expires_at = max(expires_at, ` + sqNow + ` + ?5)` + sqHolder + `
  AND expires_at > ` + sqNow

	// sqCheckHeld needs no lock clause: see checkHeld.
	sqCheckHeld = `SELECT 1 FROM ` + locksTable + sqHolder + ` AND expires_at > ` + sqNow

	// sqFenceUpsert raises stripes' counters (see deleteDoomed).
	sqFenceUpsert = `INSERT INTO ` + fencesTable + ` (stripe, token) VALUES %s
ON CONFLICT (stripe) DO UPDATE SET token = max(token, excluded.token)`

	// Parameters: ?1 grace µs, ?2 after, ?3 limit.
	sqSweepScan = `
SELECT name, expires_at < ` + sqNow + ` - ?1 FROM ` + locksTable + `
WHERE name > ?2 ORDER BY name LIMIT ?3`

	sqHeldColumns = `
SELECT name, token, owner_host, owner_id, hold_count, note,
    ` + sqNow + ` - acquired_at, expires_at - ` + sqNow + `
FROM ` + locksTable

	sqLocks       = sqHeldColumns + ` WHERE expires_at > ` + sqNow + ` ORDER BY name LIMIT ?1`
	sqHeldByName  = sqHeldColumns + ` WHERE name = ?1 AND expires_at > ` + sqNow
	sqCountLapsed = `SELECT count(*) FROM ` + locksTable + ` WHERE ` + sqLapsed
)

func newSQLiteStore(db *sql.DB) sqliteStore {
	return sqliteStore{listing: listing{db, listingSQL{sqLocks, sqHeldByName, sqCountLapsed}}, db: db, ready: &sqliteReady{db: db}, turn: make(chan struct{}, 1)}
}

func (s sqliteStore) tryAcquire(ctx context.Context, a attempt) (outcome, error) {
	if err := s.ready.check(ctx); err != nil {
		return outcome{}, err
	}
	remaining := func() (holderInfo, bool, error) {
		h, err := scanHolder(s.db.QueryRowContext(ctx, sqRemaining, a.host, a.ownerID, a.name))
		if errors.Is(err, sql.ErrNoRows) {
			return holderInfo{}, false, nil
		}
		return h, err == nil, err
	}
	if a.polling {
		// A lease with time left cannot be taken by anyone else; reading
		// needs no write lock.
		h, found, err := remaining()
		if err != nil || found && h.remaining > 0 {
			return outcome{holder: h}, err
		}
	}
	args := []any{a.name, a.queueID(), a.host, a.ownerID, a.note, micros(a.ttl), micros(a.minHold)}
	var out outcome
	err := s.write(ctx, func() error { return s.db.QueryRowContext(ctx, sqTake, args...).Scan(&out.token) })
	if err == nil {
		out.acquired = true
		return out, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return outcome{}, err
	}
	h, found, err := remaining()
	if err != nil || found {
		return outcome{holder: h}, err
	}
	err = s.write(ctx, func() error {
		return s.db.QueryRowContext(ctx, sqInsert, append(args, stripeOf(a.name))...).Scan(&out.token)
	})
	if errors.Is(err, sql.ErrNoRows) {
		// Someone created the row since, or older fair waiters are queued.
		return outcome{}, nil
	}
	if err != nil {
		return outcome{}, err
	}
	out.acquired = true
	return out, nil
}

func (s sqliteStore) release(ctx context.Context, h holder) (bool, error) {
	if err := s.ready.check(ctx); err != nil {
		return false, err
	}
	var ok bool
	err := s.write(ctx, func() (err error) {
		ok, err = execOne(ctx, s.db, sqRelease, h.name, h.host, h.ownerID, h.token)
		return err
	})
	return ok, err
}

// sqDropHolds frees name if the owner holds it: every hold, at once (see
// Locker.dropOrphan). SQLite's one writer at a time orders it after any
// take still being written.
const sqDropHolds = `
UPDATE ` + locksTable + ` SET hold_count = 0, expires_at = ` + sqNow + `
WHERE name = ?1 AND owner_host = ?2 AND owner_id = ?3 AND hold_count > 0`

// dropHolds frees every hold o has of name.
func (s sqliteStore) dropHolds(ctx context.Context, name string, o dblock.Owner) error {
	return s.write(ctx, func() error {
		_, err := s.db.ExecContext(ctx, sqDropHolds, name, o.Host, o.ID)
		return err
	})
}

func (s sqliteStore) renew(ctx context.Context, h holder, ttl time.Duration) (bool, error) {
	if err := s.ready.check(ctx); err != nil {
		return false, err
	}
	var ok bool
	err := s.write(ctx, func() (err error) {
		ok, err = execOne(ctx, s.db, sqRenew, h.name, h.host, h.ownerID, h.token, micros(ttl))
		return err
	})
	return ok, err
}

// checkHeld reads h's row in tx. SQLite has no shared row lock, and needs
// none. A transaction that writes after reading commits only if no other
// connection wrote in between; else its write fails with SQLITE_BUSY. One
// begun with BEGIN IMMEDIATE keeps every other writer out until it ends.
// So no takeover can come between the check and the commit.
func (s sqliteStore) checkHeld(ctx context.Context, tx *sql.Tx, h holder) (bool, error) {
	return queryOne(ctx, tx, sqCheckHeld, h.name, h.host, h.ownerID, h.token)
}

// sweep looks at the next limit rows after after, then, when some have
// lapsed, deletes them in one write transaction that rechecks the lapse
// and raises their stripes' counters first.
func (s sqliteStore) sweep(ctx context.Context, grace time.Duration, limit int, after string) (b sweepBatch, err error) {
	if err := s.ready.check(ctx); err != nil {
		return b, err
	}
	b, lapsed, err := scanSweep(s.db.QueryContext(ctx, sqSweepScan, micros(grace), after, limit))
	if err != nil || len(lapsed) == 0 {
		return b, err
	}
	pickSQL := `SELECT name, stripe, token FROM ` + locksTable + `
WHERE expires_at < ` + sqNow + ` - ? AND name IN (` + placeholders(len(lapsed)) + `)`
	err = s.write(ctx, func() error {
		return sqliteImmediate(ctx, s.db, func(conn *sql.Conn) (err error) {
			b.deleted, err = deleteDoomed(ctx, conn, pickSQL, append([]any{micros(grace)}, lapsed...), sqFenceUpsert)
			return err
		})
	})
	if err != nil {
		return sweepBatch{}, err
	}
	return b, nil
}

// SQLite has no notifications, no sessions and no doorbells (the Locker's
// crash grace is 0 on SQLite, so no marker is ever recorded or awaited).
func (sqliteStore) wantWake(_ context.Context, _ string, h holderInfo) (bool, holderInfo, error) {
	return false, h, nil
}

func (sqliteStore) AwaitBell(context.Context, int64, int64, time.Duration, func(bool)) (bool, error) {
	return false, errors.New("rowlock: SQLite has no doorbells")
}

func (sqliteStore) AwaitMarkerGone(context.Context, int64, time.Duration) (bool, error) {
	return false, nil
}

func (sqliteStore) Shorten(context.Context, string, int64, int64, time.Duration) (bool, error) {
	return false, nil
}

func (sqliteStore) notifies() bool { return false }

func (sqliteStore) close() {}

// write runs fn, which writes, in its turn among the store's writers (a
// channel serves blocked senders in order), or gives up when ctx ends.
func (s sqliteStore) write(ctx context.Context, fn func() error) error {
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.turn }()
	return fn()
}

// sqliteReady checks once, at the first statement of a Locker, that the
// pool has a busy timeout (lockkit.CheckSQLite); New does no I/O. A failed
// check is repeated by the next statement.
type sqliteReady struct {
	db   *sql.DB
	mu   sync.Mutex
	done bool
}

func (r *sqliteReady) check(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil
	}
	if err := lockkit.CheckSQLite(ctx, r.db); err != nil {
		return err
	}
	r.done = true
	return nil
}

// sqliteImmediate runs fn in a BEGIN IMMEDIATE transaction on a connection
// of its own: database/sql's BeginTx begins a deferred one, unless the DSN
// says _txlock=immediate. A connection whose transaction cannot be ended
// is closed rather than handed back to the pool still in it.
func sqliteImmediate(ctx context.Context, db *sql.DB, fn func(*sql.Conn) error) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return err
	}
	if err = fn(conn); err == nil {
		if _, err = conn.ExecContext(ctx, `COMMIT`); err == nil {
			return nil
		}
	}
	if _, rbErr := conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`); rbErr != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return err
}

// errKindsOnSQLite refuses the lock kinds built from several rows on
// SQLite: their transactions rely on row locks (FOR UPDATE, LOCK IN SHARE
// MODE) that SQLite does not have, and have not been rewritten for its
// single writer yet.
var errKindsOnSQLite = fmt.Errorf("rowlock: AcquireAll, semaphores and read/write locks are not available on SQLite yet: %w", errors.ErrUnsupported)
