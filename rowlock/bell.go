package rowlock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"time"

	"github.com/sqllock/sqllock/internal/wake"
)

// The waiter's side of the doorbell: reading a session's bell, arming a
// hold for a ring, and waiting for it. The protocol, and why no ring is
// missed, is in internal/wake/bell.go, with the session's side.
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

// wantWake arms h's hold for a ring (steps 1 and 2 of the protocol). armed is false
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

// AwaitBell blocks, for at most wait, on generation gen of key's bells.
// When it is granted, rung reports it; dead, that the session's marker was
// free then too (the session has ended, or never rang). woke runs before
// the bell is given back, so that the waiters it wakes do not wait for
// that round trip.
func (s mysqlStore) AwaitBell(ctx context.Context, key, gen int64, wait time.Duration, woke func(dead bool)) (rung bool, err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	bell := wake.BellName(key, gen)
	var got, free sql.NullInt64
	if err := conn.QueryRowContext(ctx, myAwaitBell, bell, max(1, int64(wait/time.Second)), wake.MarkerName(key)).Scan(&got, &free); err != nil {
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
