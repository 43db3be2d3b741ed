package main

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/rowlock"
)

// heldNames measures acquire latency while more and more names are held:
// first with the table as it is, then at each level of cfg.held.
func heldNames(ctx context.Context, cfg config, e *env, t *table) (err error) {
	l, err := rowlock.New(e.db)
	if err != nil {
		return err
	}
	defer l.Close()
	owner := lockinput.NewOwner().ID
	var bulk []string
	defer func() {
		// Delete the held rows now rather than at the end of the run: the
		// later sections should not run beside them.
		logf("%s: deleting %s held names", e.target.name, count(len(bulk)))
		for batch := range slices.Chunk(bulk, 1000) {
			if derr := e.deleteLocks(context.WithoutCancel(ctx), batch); derr != nil {
				err = errors.Join(err, derr)
				e.names.lock(batch...) // for the final clean-up to try again
			}
		}
	}()
	usedName := e.newName("held-used")
	fresh, naive := 0, 0
	levels := append([]int{0}, cfg.held...)
	for _, level := range levels {
		if level > len(bulk) {
			logf("%s: holding %s names", e.target.name, count(level))
			names := make([]string, 0, level-len(bulk))
			for i := len(bulk); i < level; i++ {
				names = append(names, e.prefix+fmt.Sprintf("held-%d", i))
			}
			// Remember them before inserting, so that an error halfway
			// deletes them too.
			bulk = append(bulk, names...)
			if err := e.insertBulk(ctx, names, owner); err != nil {
				return err
			}
		}
		rows, err := countRows(ctx, e.db)
		if err != nil {
			return err
		}
		ops := []op{
			func(ctx context.Context) error {
				fresh++
				k, err := l.TryAcquire(ctx, e.newName("held-fresh", fresh))
				if err != nil {
					return err
				}
				return k.Release(ctx)
			},
			func(ctx context.Context) error {
				k, err := l.TryAcquire(ctx, usedName)
				if err != nil {
					return err
				}
				return k.Release(ctx)
			},
			func(ctx context.Context) error {
				naive++
				return e.naive(ctx, e.newName("held-naive", naive))
			},
		}
		res, err := interleave(ctx, cfg.heldOps, 10, ops)
		if err != nil {
			return err
		}
		held := "0 (table as found)"
		if level > 0 {
			held = count(level)
		}
		t.add(e.target.name, held, count(rows),
			dur(res[0].pct(50)), dur(res[0].pct(99)),
			dur(res[1].pct(50)), dur(res[1].pct(99)),
			dur(res[2].pct(50)), dur(res[2].pct(99)),
			dratio(res[0].pct(50), res[2].pct(50)))
	}
	return nil
}
