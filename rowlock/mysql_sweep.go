package rowlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// sweep looks at the next limit rows after after, then, when some have
// lapsed, deletes them in one transaction: lock them, raise the stripe
// counters to their tokens, delete them.
func (s mysqlStore) sweep(ctx context.Context, grace time.Duration, limit int, after string) (b sweepBatch, err error) {
	b, lapsed, err := scanSweep(s.db.QueryContext(ctx, mySweepScan, micros(grace), after, limit))
	if err != nil {
		return b, err
	}
	if len(lapsed) > 0 {
		if b.deleted, err = s.deleteLapsed(ctx, grace, lapsed); err != nil {
			return sweepBatch{}, err
		}
	}
	if b.scanned < limit {
		// The end of a whole sweep: the doorbells' records too, but not
		// on a Galera node, where IS_FREE_LOCK cannot see the sessions of
		// the other nodes (and where no session records any).
		galera, err := s.galera.Is(ctx, s.db)
		if err != nil || galera {
			return b, err
		}
		return b, s.deleteDeadSessions(ctx)
	}
	return b, nil
}

// deleteDeadSessions deletes the doorbell records (bell.go) of sessions
// that ended without deleting theirs: their marker is free. Keys are
// never reused, so a session found dead stays dead.
func (s mysqlStore) deleteDeadSessions(ctx context.Context) error {
	rows, err := s.db.QueryContext(ctx, mySessionsDead, maxDeadSessions)
	if err != nil {
		return err
	}
	var dead []any
	for rows.Next() {
		var key int64
		if err := rows.Scan(&key); err != nil {
			_ = rows.Close()
			return err
		}
		dead = append(dead, key)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil || len(dead) == 0 {
		return err
	}
	_, err = s.db.ExecContext(ctx, `DELETE FROM dblock_sessions WHERE session_key IN (`+placeholders(len(dead))+`)`, dead...)
	return err
}

// deleteLapsed deletes those of names that are still lapsed, raising their
// stripes' counters first, in one transaction.
func (s mysqlStore) deleteLapsed(ctx context.Context, grace time.Duration, names []any) (n int, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	lockSQL := fmt.Sprintf(mySweepLock, placeholders(len(names)))
	if n, err = deleteDoomed(ctx, tx, lockSQL, append([]any{micros(grace)}, names...), myFenceUpsert); err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// placeholders returns n comma-separated question marks.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
