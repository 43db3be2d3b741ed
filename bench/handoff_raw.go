package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// giveInCommit is the fastest handoff of a lock whose token the database
// keeps that SQL allows, as raw statements on two pinned connections: the
// holder holds a named lock (advisory; GET_LOCK) that the waiter blocks
// on. To hand over, the holder, in one transaction, gives the name's row to
// the waiter (token + 1), lets go of the named lock and commits; the
// waiter, woken, reads the row with a shared row lock, which waits for
// that commit. The wake-up runs while the commit flushes, and the waiter
// writes nothing: one durable commit and one wake-up, overlapped, are all
// it costs. (rowlock's handoff commits twice, the release and the take, and
// wakes the waiter after the first; this is what a redesign could reach.)
type giveInCommit struct {
	e           *env
	holder, got *sql.Conn
	name, bell  string
	closeConns  func()
}

func newGiveInCommit(ctx context.Context, e *env) (*giveInCommit, error) {
	name := e.newName("h-give")
	if _, err := e.db.ExecContext(ctx, e.sql.naiveInsert, name); err != nil {
		return nil, err
	}
	conns, closeConns, err := pinned(ctx, e.db, 2)
	if err != nil {
		return nil, err
	}
	return &giveInCommit{e: e, holder: conns[0], got: conns[1], name: name, bell: name + "-bell", closeConns: closeConns}, nil
}

func (g *giveInCommit) close() { g.closeConns() }

// hold takes the row back and the named lock; the release gives the row
// in its commit.
func (g *giveInCommit) hold() (func() error, error) {
	ctx := context.Background()
	if _, err := g.e.db.ExecContext(ctx, g.e.sql.xferHold, g.name); err != nil {
		return nil, err
	}
	if err := g.e.advLock(ctx, g.holder, g.bell); err != nil {
		return nil, err
	}
	return func() error {
		tx, err := g.holder.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		giveStmt, err := g.e.prepared.stmt(ctx, g.holder, g.e.sql.xferGive)
		if err != nil {
			return errors.Join(err, tx.Rollback())
		}
		if _, err := tx.StmtContext(ctx, giveStmt).ExecContext(ctx, g.name); err != nil {
			return errors.Join(err, tx.Rollback())
		}
		unlock, err := g.e.prepared.stmt(ctx, g.holder, g.e.sql.advUnlock)
		if err != nil {
			return errors.Join(err, tx.Rollback())
		}
		var ok sql.NullBool
		if err := tx.StmtContext(ctx, unlock).QueryRowContext(ctx, g.e.advKey(g.bell)).Scan(&ok); err != nil || !ok.Bool {
			return errors.Join(err, tx.Rollback(), fmt.Errorf("named lock %q not held", g.bell))
		}
		return tx.Commit()
	}, nil
}

// wait blocks on the named lock, then reads the row it was given.
func (g *giveInCommit) wait() (func() error, error) {
	ctx := context.Background()
	if err := g.e.advLock(ctx, g.got, g.bell); err != nil {
		return nil, err
	}
	var owner string
	err := g.e.queryRow(ctx, g.got, g.e.sql.xferRead, g.name).Scan(&owner)
	if err == nil && owner != "w" {
		err = fmt.Errorf("woken, the waiter found the row owned by %q, not given to it", owner)
	}
	if err != nil {
		return nil, errors.Join(err, g.e.advUnlock(ctx, g.got, g.bell))
	}
	return func() error { return g.e.advUnlock(ctx, g.got, g.bell) }, nil
}
