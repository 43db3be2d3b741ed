package wake

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/internal/clock"
)

// beatInterval is how often the session proves its marker is held: three
// chances before the 0.9·G deadline.
func (s *Session) beatInterval() time.Duration { return s.cfg.Grace / 3 }

// markerDeadline is how long after a successful heartbeat was sent the
// marker is trusted: a tenth of G short of it, as for leases.
func (s *Session) markerDeadline(sent time.Time) time.Time {
	return sent.Add(s.cfg.Grace - s.cfg.Grace/10)
}

// newMarkerKey returns a random key in [1, 2^63).
func newMarkerKey() int64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // never fails (crypto/rand documents it)
		if k := int64(binary.LittleEndian.Uint64(b[:]) >> 1); k != 0 {
			return k
		}
	}
}

// MarkerName is the MySQL GET_LOCK name of key (at most 64 characters).
func MarkerName(key int64) string { return fmt.Sprintf("sqllock.%d", key) }

// takeMarker takes a fresh marker on the session connection.
func (s *Session) takeMarker(ctx context.Context, sc sessionConn) (key int64, sent time.Time, err error) {
	key = newMarkerKey()
	sent = clock.Now()
	var took bool
	if s.cfg.Postgres {
		err = sc.query(ctx, "SELECT pg_try_advisory_lock($1)", []any{key}, &took)
	} else {
		var got sql.NullInt64
		err = sc.query(ctx, "SELECT GET_LOCK(?, 0)", []any{MarkerName(key)}, &got)
		took = got.Valid && got.Int64 == 1
	}
	if err != nil {
		return 0, sent, err
	}
	if !took {
		return 0, sent, fmt.Errorf("rowlock: session marker %d is taken", key)
	}
	return key, sent, nil
}

// Heartbeat statements: true when the marker is held by the session that
// answers. A transaction pooler would answer from another server session,
// where the marker is not: the session is then failed, and its locks lost.
const (
	pgBeat = `
SELECT EXISTS (SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted AND objsubid = 1
      AND classid = ($1::bigint >> 32)::oid AND objid = ($1::bigint & 4294967295)::oid)`
	myBeat = `SELECT IS_USED_LOCK(?) <=> CONNECTION_ID()`
)

// beat proves the marker is held and moves the deadline on.
func (s *Session) beat(ctx context.Context, inc *incarnation, sc sessionConn, key int64, sent time.Time) error {
	s.mu.Lock()
	deadline := inc.deadline
	s.mu.Unlock()
	bctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var held bool
	var err error
	if s.cfg.Postgres {
		err = sc.query(bctx, pgBeat, []any{key}, &held)
	} else {
		err = sc.query(bctx, myBeat, []any{MarkerName(key)}, &held)
	}
	switch {
	case err != nil && bctx.Err() != nil && ctx.Err() == nil:
		return fmt.Errorf("heartbeat not answered within %v of the last: %w", s.cfg.Grace-s.cfg.Grace/10, err)
	case err != nil:
		return err
	case !held:
		return errors.New("the session marker is not held by the session that answered (a pooler in front of the session connection?)")
	}
	s.mu.Lock()
	inc.deadline = s.markerDeadline(sent)
	s.mu.Unlock()
	return nil
}
