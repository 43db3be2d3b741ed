package forupdate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// setUp records the limit (semRecord) or creates the missing slots
// (semSlots), outside any transaction.
func (s *semLocking) setUp(ctx context.Context, step semStep) error {
	var err error
	if step == semRecord {
		err = s.record(ctx)
	} else {
		var missing []string
		if missing, err = s.missing(ctx); err == nil && len(missing) > 0 {
			err = s.create(ctx, missing)
		}
	}
	if err == nil || errors.Is(err, dblock.ErrLimitMismatch) {
		return err
	}
	return s.setUpError(ctx, err)
}

func (s *semLocking) setUpError(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		s.clean = false
		return errors.Join(dblock.ErrNotAcquired, ctx.Err())
	case lockkit.ClassifyError(err) == lockkit.ClassContention:
		return nil // done by someone else meanwhile: look again
	}
	s.clean = false
	return s.error(ctx, err)
}

// record records the semaphore's limit: inserts it when none is, or
// changes it when no one holds or awaits a permit of the name; otherwise
// it fails with dblock.ErrLimitMismatch.
func (s *semLocking) record(ctx context.Context) error {
	sq, conn, key, limit := s.l.d.semSQL(), s.call.conn, s.key.name, s.req.limit
	res, err := s.l.d.on(conn).ExecContext(ctx, sq.insert, key, limit)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		return nil
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var recorded int
	err = s.l.d.on(tx).QueryRowContext(ctx, sq.readLocked, key).Scan(&recorded)
	switch class := lockkit.ClassifyError(err); {
	case errors.Is(err, sql.ErrNoRows):
		return nil // deleted meanwhile: the next attempt finds it missing
	case class == lockkit.ClassLockUnavailable || class == lockkit.ClassContention:
		// Held or awaited: report the limit in use.
		if err := tx.Rollback(); err != nil {
			return err
		}
		if err := s.l.d.on(conn).QueryRowContext(ctx, sq.read, key).Scan(&recorded); err != nil {
			return err
		}
		if recorded == limit {
			return nil // changed back meanwhile
		}
		return fmt.Errorf("forupdate: semaphore %q: %w: asked for %d permits, its holders use %d",
			s.req.name, dblock.ErrLimitMismatch, limit, recorded)
	case err != nil:
		return err
	}
	if recorded != limit {
		if _, err := s.l.d.on(tx).ExecContext(ctx, sq.update, limit, key); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// missing returns the slots whose rows do not exist.
func (s *semLocking) missing(ctx context.Context) ([]string, error) {
	rows, err := s.l.d.on(s.call.conn).QueryContext(ctx, s.l.d.semSQL().existing(len(s.slots)), s.slotArgs()...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	exists := make(map[string]bool, len(s.slots))
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		exists[name] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var missing []string
	for _, name := range s.slots {
		if !exists[name] {
			missing = append(missing, name)
		}
	}
	return missing, nil
}

// create inserts the slots unless they exist.
func (s *semLocking) create(ctx context.Context, slots []string) error {
	_, err := s.l.d.on(s.call.conn).ExecContext(ctx, s.l.d.semSQL().create(len(slots)), names(slots)...)
	return err
}

func (s *semLocking) slotArgs() []any { return names(s.slots) }

func names(ss []string) []any {
	args := make([]any, len(ss))
	for i, name := range ss {
		args[i] = name
	}
	return args
}
