package rowlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// write takes the write hold: the writer row, then the readers' leave.
//
// Its complexity (over 15) is the writer's steps in protocol order (the
// writer row, re-entry, the readers' leave, lapsed readers settled, the
// row given back on failure); split, that order would be spread out.
func (t *rwTry) write(ctx context.Context, wait bool) (*RWLock, error) {
	rows, err := t.l.kinds().rows(ctx, t.all)
	if err != nil {
		return nil, t.dbError(ctx, err)
	}
	if t.carried && t.readsItself(rows) {
		return nil, t.upgradeError()
	}
	mode := takeNow
	if wait {
		mode = takeWait
	}
	k, err := t.l.takeRow(ctx, t.w, t.opts, mode, t.owner, rows[t.w].heldBy(t.owner), t.metrics)
	if err != nil {
		return nil, err
	}
	for {
		rows, err := t.l.kinds().rows(ctx, t.readers)
		if err != nil {
			t.l.giveBack(ctx, []*Lock{k})
			return nil, t.dbError(ctx, err)
		}
		if t.carried && t.readsItself(rows) {
			// It began to read since the first look.
			t.l.giveBack(ctx, []*Lock{k})
			return nil, t.upgradeError()
		}
		blockers := t.liveReaders(rows)
		if len(blockers) == 0 {
			// The readers' rows look lapsed or free: settle those that
			// exist, and look at them again as settled.
			var existing []string
			for _, name := range t.readers {
				if _, ok := rows[name]; ok {
					existing = append(existing, name)
				}
			}
			if len(existing) > 0 {
				settled, err := t.settle(ctx, existing, wait)
				if err != nil {
					t.l.giveBack(ctx, []*Lock{k})
					if errors.Is(err, dblock.ErrNotAcquired) {
						return nil, err
					}
					return nil, t.dbError(ctx, err)
				}
				blockers = t.liveReaders(settled)
			}
		}
		if len(blockers) == 0 {
			// The readers were awaited, and settled, after the take.
			if err := t.l.lostBeforeReturned(ctx, "write lock", t.name, k); err != nil {
				return nil, err
			}
			return t.hold(k, k.Token(), true), nil
		}
		if !wait {
			t.l.giveBack(ctx, []*Lock{k})
			return nil, dblock.ErrNotAcquired
		}
		if err := t.wait(ctx, "readers", t.readers, blockers); err != nil {
			t.l.giveBack(ctx, []*Lock{k})
			return nil, err
		}
	}
}

// liveReaders are the reader rows among rows whose lease is live.
func (t *rwTry) liveReaders(rows map[string]kindRow) []blocker {
	var blockers []blocker
	for _, name := range t.readers {
		if r := rows[name]; r.live {
			blockers = append(blockers, blocker{name: name, h: r.holder})
		}
	}
	return blockers
}

// settle reads the rows of names again, locked for update, before an
// acquisition passes over the lapsed ones. A holder whose lease lapsed
// may still be inside a fenced transaction that its CheckHeld began, with
// its row locked in shared mode: the lock for update waits for that
// transaction to end, so the hold that CheckHeld proved is over before
// the acquisition can complete, as a takeover's UPDATE of a mutex's row
// waits. (A plain read of the row would not wait.) Without wait, a row
// locked by another transaction makes it dblock.ErrNotAcquired at once.
func (t *rwTry) settle(ctx context.Context, names []string, wait bool) (map[string]kindRow, error) {
	if !wait {
		rows, err := t.l.kinds().lockRows(ctx, names, true)
		if rowsBusy(err) {
			return nil, dblock.ErrNotAcquired
		}
		return rows, err
	}
	var rows map[string]kindRow
	err := lockkit.RetryContentionUntilDone(ctx, func() (err error) {
		rows, err = t.l.kinds().lockRows(ctx, names, false)
		return err
	})
	return rows, err
}

// readsItself reports whether the owner holds a reader row.
func (t *rwTry) readsItself(rows map[string]kindRow) bool {
	for _, name := range t.readers {
		if rows[name].heldBy(t.owner) {
			return true
		}
	}
	return false
}

func (t *rwTry) upgradeError() error {
	return fmt.Errorf("rowlock: write lock %q: %w", t.name, dblock.ErrUpgrade)
}
