package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/pgxrow"
	"github.com/sqllock/sqllock/internal/rowops"
)

// sweepSemaphores deletes the recorded limits of semaphores (see
// Locker.Semaphore) that nobody uses: no permit held, and the record last written
// more than grace ago by the database clock. One batch per call, as sweep:
// it looks at the next limit records after the name after ("" starts at
// the first) and returns how many it deleted and where the next batch
// starts, "" once the batch reached the end. Package reaper runs it
// (through rowops).
//
// A record only holds the limit that the holders of a name agreed on; with
// no holder it constrains nobody (any limit is taken up), so deleting it
// loses nothing. Each is deleted in a transaction of its own that locks it
// first, skipping records an acquirer has locked, and then finds every
// slot free, so an acquirer either is seen holding its slot or reads the
// record after the deletion and writes it again. Contention is retried
// until ctx ends; the error then wraps ctx.Err().
// Errors: dblock.ErrInvalidOption, dblock.ErrSchemaMissing, or a driver
// error.
func (l *Locker) sweepSemaphores(ctx context.Context, grace time.Duration, limit int, after string) (deleted int, next string, err error) {
	switch {
	case ctx == nil:
		return 0, "", fmt.Errorf("rowlock: SweepSemaphores: %w", lockinput.CheckContext(ctx))
	case grace < 0:
		return 0, "", fmt.Errorf("rowlock: SweepSemaphores: %w", &dblock.OptionError{Option: "grace", Reason: "must not be negative"})
	case limit < 1 || limit > rowops.MaxSweepBatch:
		return 0, "", fmt.Errorf("rowlock: SweepSemaphores: %w", &dblock.OptionError{Option: "limit", Reason: fmt.Sprintf("must be 1 to %d", rowops.MaxSweepBatch)})
	case len(after) > dblock.MaxNameLength:
		return 0, "", fmt.Errorf("rowlock: SweepSemaphores: %w", &dblock.OptionError{Option: "after", Reason: fmt.Sprintf("longer than %d bytes: not a position a sweep returned", dblock.MaxNameLength)})
	}
	if l.cfg.dialect == dblock.SQLite {
		return 0, "", nil // no semaphores there: errKindsOnSQLite
	}
	q := l.kinds().limitSQL()
	var names []string
	err = lockkit.RetryContentionUntilDone(ctx, func() (err error) {
		names, err = scanRecords(l.runner().QueryContext(ctx, q.scan, after, limit))
		return err
	})
	if err != nil {
		return 0, "", lockkit.WrapDBError("rowlock: SweepSemaphores", err)
	}
	for _, name := range names {
		var gone bool
		err := lockkit.RetryContentionUntilDone(ctx, func() (err error) {
			gone, err = deleteIdleRecord(ctx, l.runner(), q, name, grace)
			return err
		})
		if err != nil {
			return deleted, "", lockkit.WrapDBError("rowlock: SweepSemaphores", err)
		}
		if gone {
			deleted++
		}
	}
	if len(names) < limit {
		return deleted, "", nil
	}
	return deleted, names[len(names)-1], nil
}

// scanRecords collects the names of q.scan's rows.
func scanRecords(rows *sql.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		var name string
		var permits int
		if err := rows.Scan(&name, &permits); err != nil {
			_ = rows.Close()
			return nil, err
		}
		names = append(names, name)
	}
	return names, errors.Join(rows.Err(), rows.Close())
}

// deleteIdleRecord deletes name's record if it is idle (see
// sweepSemaphores), in one READ COMMITTED transaction: lock it, count its
// held slots with a statement of its own, delete it.
func deleteIdleRecord(ctx context.Context, db pgxrow.DB, q limitSQL, name string, grace time.Duration) (gone bool, err error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return false, err
	}
	defer func() {
		if !gone {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	var permits int
	err = db.On(tx).QueryRowContext(ctx, q.lockIdle, name, micros(grace)).Scan(&permits)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil // in use, young, or gone already
	}
	if err != nil {
		return false, err
	}
	slots := make([]string, min(max(permits, 1), MaxSemaphoreLimit))
	for i := range slots {
		slots[i] = slotName(name, i)
	}
	// No slot is named "". A slot whose holder's fenced transaction is
	// still open keeps the record until that transaction ends (countLive).
	held, err := countLive(ctx, db.On(tx), q, "", slots)
	if err != nil {
		return false, err
	}
	if held > 0 {
		return false, nil
	}
	if _, err := db.On(tx).ExecContext(ctx, q.remove, name); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, err
	}
	return true, nil
}
