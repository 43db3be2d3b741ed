package wake

import (
	"context"
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
// any time: the current generation c and c+1. dblock_sessions records c,
// or c+1 once a ring has begun. To ring, it records c+1, then releases c
// and takes c+2 in one statement. A generation is never taken again once
// released.
//
// A waiter, after a failed try that found the lock held under key K with
// token T:
//
//  1. reads K's recorded generation g from dblock_sessions (no row: K
//     does not ring, and the waiter polls), or the one after it if bell g
//     is free already (the session has ended, which the wait then finds
//     at once; or a record failed and g has rung);
//  2. arms: sets wanted on the row if it is still held with token T
//     (rowlock's myArm). If it is not, the lock changed hands and the waiter tries
//     again at once;
//  3. has its Locker's watcher block a pool connection in
//     GET_LOCK('sqllock.K.g') (rowlock's mysqlStore.AwaitBell).
//
// The last release of T sees wanted (the row lock orders it after step 2)
// and has its process ring. Why no ring is missed: g was recorded when the
// ring that releases g-1 began, so every ring that begins after step 1
// releases g or a later generation, and every generation below the one a
// ring releases was released before. The request to ring for T's release
// is made after step 2; the session serves it with a ring that begins
// after the request (one made while a ring is under way waits for the
// next), so that ring releases g or later, and the GET_LOCK of step 3
// returns no later than it. A waiter that read an old generation wakes at
// once, tries, and reads a newer one. Step 1 must come before step 2: read
// after, g could be a generation whose ring the release of T has already
// had. The record goes before the ring (see bells.ring): recorded after
// it, a rung generation could be read while a woken watcher holds it, and
// the waiter's watcher, having seen it ring, would decline it and leave
// the waiter to poll.
//
// When the holder's session ends, the server frees its bells too: the
// waiter's GET_LOCK returns, and the same statement finds the marker free
// (IS_FREE_LOCK), which is the crash detection of watcher.go.
//
// A bell wakes a waiter; it never decides who holds a lock: every
// acquisition is still the take statement.

// The session's side of the doorbell (the waiter's is rowlock's
// mysqlStore.wantWake and AwaitBell).
const (
	// myTakeBells takes a session's first two bells (nobody can hold the
	// bells of a fresh marker key); myRecordBell records its current one.
	myTakeBells  = `SELECT GET_LOCK(?, 0) + GET_LOCK(?, 0)`
	myRecordBell = `
INSERT INTO dblock_sessions (session_key, bell, started_at) VALUES (?, ?, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE bell = VALUES(bell)`
	// myRing releases the current bell and takes the one after next.
	myRing       = `SELECT RELEASE_LOCK(?) + GET_LOCK(?, 0)`
	myForgetBell = `DELETE FROM dblock_sessions WHERE session_key = ?`
)

// bellForgetWait bounds the deletion of a stopping session's record.
const bellForgetWait = time.Second

// BellName is the GET_LOCK name of generation gen of key's bells (at most
// 48 characters of MySQL's 64).
func BellName(key, gen int64) string { return fmt.Sprintf("sqllock.%d.%d", key, gen) }

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
func (s *Session) startBells(ctx context.Context, sc sessionConn, key int64) (bells, error) {
	b := bells{key: key, cur: -1}
	var got int64
	if err := sc.query(ctx, myTakeBells, []any{BellName(key, 0), BellName(key, 1)}, &got); err != nil {
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
		s.cfg.Logger.Debug("rowlock: the session's doorbell could not be recorded; waiters in other processes poll for this Locker's releases",
			"error", err)
		return b, nil
	}
	b.cur = 0
	return b, nil
}

// ring lets waiters blocked on the current bell go: record the next as
// current, then release the current and take the one after next.
//
// The record goes first so that a recorded generation is one the session
// holds for as long as it lives. Recorded after the ring, it would name a
// rung bell for a moment, and rowlock's myBellOf's IS_FREE_LOCK cannot tell a rung
// bell from one that a watcher woken by the ring holds while it wakes its
// waiters: a waiter reading then gets the rung bell, its own watcher
// declines it (having seen it ring), and it polls instead of being woken
// by the next ring. A failed record is returned after the ring, which
// still goes out: myBellOf's IS_FREE_LOCK then corrects the stale record.
// The cost: a record held up (only a transaction of someone else's can
// lock the session's row) holds the ring up with it.
func (b *bells) ring(ctx context.Context, sc sessionConn) error {
	if b.cur < 0 {
		return nil
	}
	recordErr := sc.exec(ctx, myRecordBell, b.key, b.cur+1)
	var got int64
	if err := sc.query(ctx, myRing, []any{BellName(b.key, b.cur), BellName(b.key, b.cur+2)}, &got); err != nil {
		return errors.Join(recordErr, err)
	}
	if got != 2 {
		return fmt.Errorf("rowlock: ringing the doorbell: bell %d of session marker %d is taken", b.cur+2, b.key)
	}
	b.cur++
	return recordErr
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
func (s *Session) Ring() {
	select {
	case s.rings <- struct{}{}:
	default:
	}
}
