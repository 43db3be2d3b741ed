package rowlock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"
)

// Doorbells wake MySQL waiters in other processes when the lock they wait
// for is released, as NOTIFY does on PostgreSQL, by blocking them in the
// database: a waiter waits in GET_LOCK for a "bell", a user-level lock that
// the holder's session connection holds and lets go of to ring.
//
// Each session (one per Locker, see session.go) has bells
// 'sqllock.<key>.<generation>', key being its marker's, and holds two at
// any time: the current generation c, whose number dblock_sessions
// records, and c+1. To ring, it releases c and takes c+2 in one statement,
// then records c+1. A generation is never taken again once released.
//
// A waiter, after a failed try that found the lock held under key K with
// token T:
//
//  1. reads K's generation g from dblock_sessions (no row: K does not
//     ring, and the waiter polls), or the one after it if bell g is free
//     already: the record follows the ring, and a waiter that read the
//     generation just rung would wait on a bell that no longer rings
//     (its watcher declines it, and it polls: see watcher.rung);
//  2. arms: sets wanted on the row if it is still held with token T
//     (myArm). If it is not, the lock changed hands and the waiter tries
//     again at once;
//  3. has its Locker's watcher block a pool connection in
//     GET_LOCK('sqllock.K.g') (awaitBell).
//
// The last release of T sees wanted (the row lock orders it after step 2)
// and has its process ring. Why no ring is missed: the recorded generation
// never runs ahead of the bells held (a generation is recorded only once
// it is the current one), and the one after a recorded generation found
// free is at most the current one (the free one has rung, or the session
// has ended), so g is at most the current generation c at step 1; the
// ring that follows the release of T releases the generation current
// then, which is at least c, and every generation below it was released
// before. So the GET_LOCK of step 3 returns no later than that
// ring. A waiter that read an old generation wakes at once, tries, and
// reads a newer one. Step 1 must come before step 2: read after, g could
// be the generation taken by a ring that has already happened.
//
// When the holder's session ends, the server frees its bells too: the
// waiter's GET_LOCK returns, and the same statement finds the marker free
// (IS_FREE_LOCK), which is the crash detection of watcher.go.
//
// A bell wakes a waiter; it never decides who holds a lock: every
// acquisition is still the take statement.
const (
	// myBellOf reads a session's current bell generation: the recorded
	// one, or the one after it if the recorded one is free already (it
	// has rung and the ring's record is on its way; or the session has
	// ended, which the wait then finds out at once).
	myBellOf = `
SELECT bell + COALESCE(IS_FREE_LOCK(CONCAT('sqllock.', session_key, '.', bell)), 0)
FROM dblock_sessions WHERE session_key = ?`

	// myArm asks the release of the hold with this token for a ring, for
	// this process (the second ?), or, when another process asked
	// already, for several (''). The token is reassigned to itself
	// through LAST_INSERT_ID so that a matched row reports a non-zero
	// insert id even when the update changed nothing (MySQL counts only
	// changed rows as affected). Parameters: process, process, name, token.
	myArm = `
UPDATE ` + locksTable + `
SET wanted_by = IF(wanted AND wanted_by <> ?, '', ?), wanted = TRUE, token = LAST_INSERT_ID(token)
WHERE name = ? AND token = ? AND hold_count > 0 AND expires_at > UTC_TIMESTAMP(6)`

	// myTakeBells takes a session's first two bells (nobody can hold the
	// bells of a fresh marker key); myRecordBell records its current one.
	myTakeBells  = `SELECT GET_LOCK(?, 0) + GET_LOCK(?, 0)`
	myRecordBell = `
INSERT INTO dblock_sessions (session_key, bell, started_at) VALUES (?, ?, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE bell = VALUES(bell)`
	// myRing releases the current bell and takes the one after next.
	myRing       = `SELECT RELEASE_LOCK(?) + GET_LOCK(?, 0)`
	myForgetBell = `DELETE FROM dblock_sessions WHERE session_key = ?`
	// myAwaitBell waits for a bell, then looks at the session's marker;
	// MySQL evaluates the select list left to right.
	myAwaitBell   = `SELECT GET_LOCK(?, ?), IS_FREE_LOCK(?)`
	myReleaseBell = `SELECT RELEASE_LOCK(?)`

	// mySessionsDead finds the records of sessions whose marker is free
	// (a plain read: it locks nothing that a live session's ring needs).
	mySessionsDead = `
SELECT session_key FROM dblock_sessions
WHERE IS_FREE_LOCK(CONCAT('sqllock.', session_key)) = 1
LIMIT ?`
)

// maxDeadSessions bounds the doorbell records one sweep deletes.
const maxDeadSessions = 1000

// bellForgetWait bounds the deletion of a stopping session's record.
const bellForgetWait = time.Second

// bellName is the GET_LOCK name of generation gen of key's bells (at most
// 48 characters of MySQL's 64).
func bellName(key, gen int64) string { return fmt.Sprintf("sqllock.%d.%d", key, gen) }

// wantWake arms h's hold for a ring (steps 1 and 2 above). armed is false
// when the holder's session does not ring (the waiter polls); the error is
// errHoldEnded when the hold has ended or changed hands (the waiter tries
// again at once).
func (s mysqlStore) wantWake(ctx context.Context, name string, h holderInfo) (bool, holderInfo, error) {
	if h.key == 0 {
		return false, h, nil
	}
	var gen int64
	switch err := s.hot.QueryRowContext(ctx, myBellOf, h.key).Scan(&gen); {
	case errors.Is(err, sql.ErrNoRows):
		return false, h, nil
	case err != nil:
		return false, h, err
	}
	res, err := s.hot.ExecContext(ctx, myArm, s.process, s.process, name, h.token)
	if err != nil {
		return false, h, err
	}
	switch id, err := res.LastInsertId(); {
	case err != nil:
		return false, h, err
	case id == 0:
		return false, holderInfo{}, errHoldEnded
	}
	h.bell, h.rings = gen, true
	return true, h, nil
}

// awaitBell blocks, for at most wait, on generation gen of key's bells.
// When it is granted, rung reports it; dead, that the session's marker was
// free then too (the session has ended, or never rang). woke runs before
// the bell is given back, so that the waiters it wakes do not wait for
// that round trip.
func (s mysqlStore) awaitBell(ctx context.Context, key, gen int64, wait time.Duration, woke func(dead bool)) (rung bool, err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	bell := bellName(key, gen)
	var got, free sql.NullInt64
	if err := conn.QueryRowContext(ctx, myAwaitBell, bell, max(1, int64(wait/time.Second)), markerName(key)).Scan(&got, &free); err != nil {
		return false, err
	}
	if got.Int64 != 1 {
		return false, nil // timed out (0), or an error (NULL)
	}
	woke(free.Int64 == 1)
	var released sql.NullInt64
	if err := conn.QueryRowContext(context.WithoutCancel(ctx), myReleaseBell, bell).Scan(&released); err != nil {
		// Never hand a connection that may hold the bell back to the
		// pool: other waiters of this generation wait for it.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return true, nil
}

// bells is the state of a session incarnation's doorbell, kept by the
// session's goroutine only.
type bells struct {
	key int64
	cur int64 // the current generation; -1 when the session does not ring
}

// startBells takes the first two bells of a fresh marker key and records
// the session as ringing. A failure leaves the session without a doorbell
// (its waiters' Lockers poll for its releases); only a failed connection
// is returned as an error.
func (s *session) startBells(ctx context.Context, sc sessionConn, key int64) (bells, error) {
	b := bells{key: key, cur: -1}
	var got int64
	if err := sc.query(ctx, myTakeBells, []any{bellName(key, 0), bellName(key, 1)}, &got); err != nil {
		return b, err
	}
	if got != 2 {
		return b, fmt.Errorf("rowlock: the bells of session marker %d are taken", key)
	}
	if err := sc.exec(ctx, myRecordBell, key, int64(0)); err != nil {
		if ctx.Err() != nil {
			return b, err
		}
		// A schema older than version 4 or a read-only server, where
		// the acquisitions fail and say so; or a passing failure. The
		// session works on without a doorbell: other processes' waiters
		// poll for this Locker's releases.
		s.logger.Debug("rowlock: the session's doorbell could not be recorded; waiters in other processes poll for this Locker's releases",
			"error", err)
		return b, nil
	}
	b.cur = 0
	return b, nil
}

// ring lets waiters blocked on the current bell go: release it, take the
// one after next, record the next as current.
func (b *bells) ring(ctx context.Context, sc sessionConn) error {
	if b.cur < 0 {
		return nil
	}
	var got int64
	if err := sc.query(ctx, myRing, []any{bellName(b.key, b.cur), bellName(b.key, b.cur+2)}, &got); err != nil {
		return err
	}
	if got != 2 {
		return fmt.Errorf("rowlock: ringing the doorbell: bell %d of session marker %d is taken", b.cur+2, b.key)
	}
	b.cur++
	return sc.exec(ctx, myRecordBell, b.key, b.cur)
}

// forget deletes the session's record once it stops ringing (it is
// stopping); a failure leaves the row to the reaper.
func (b *bells) forget(sc sessionConn) {
	if b.cur < 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), bellForgetWait)
	defer cancel()
	_ = sc.exec(ctx, myForgetBell, b.key)
}

// ring asks the session to ring its doorbell; requests made while one is
// pending are one ring.
func (s *session) ring() {
	select {
	case s.rings <- struct{}{}:
	default:
	}
}
