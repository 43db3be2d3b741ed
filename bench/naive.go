package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqllock/sqllock/dblock"
)

// naivePoll is how often the naive recipe's waiter retries on MySQL, which
// has no notifications: rowlock's own first polling pause.
const naivePoll = 5 * time.Millisecond

// naiveBlocking is the naive lock-table recipe made blocking the way a user
// would without sqllock: the holder INSERTs the name's row and DELETEs it;
// a waiter retries the INSERT when PostgreSQL NOTIFYs it of a release (on a
// connection of its own that LISTENs), or every naivePoll on MySQL. No
// lease, no owner, no token, no queue: the raw SQL rowlock's handoff is
// built on.
type naiveBlocking struct {
	e       *env
	name    string
	channel string
	listen  *sql.Conn // PostgreSQL: the waiter's listening connection
}

func newNaiveBlocking(ctx context.Context, e *env, name string) (*naiveBlocking, error) {
	n := &naiveBlocking{e: e, name: name, channel: e.prefix + "naive"}
	if e.dialect != dblock.Postgres {
		return n, nil
	}
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	// The channel is an identifier: quoted, and made from the run's own
	// prefix, never from input.
	if _, err := conn.ExecContext(ctx, `LISTEN "`+n.channel+`"`); err != nil {
		return nil, errors.Join(err, conn.Close())
	}
	n.listen = conn
	return n, nil
}

func (n *naiveBlocking) close() {
	if n.listen != nil {
		_ = n.listen.Close()
	}
}

// tryInsert reports whether the INSERT took the name.
func (n *naiveBlocking) tryInsert(ctx context.Context) (bool, error) {
	res, err := n.e.db.ExecContext(ctx, n.e.sql.naiveTryInsert, n.name)
	if err != nil {
		return false, err
	}
	rows, err := res.RowsAffected()
	return rows == 1, err
}

// hold takes the free name; its release wakes the waiter.
func (n *naiveBlocking) hold(ctx context.Context) (func() error, error) {
	ok, err := n.tryInsert(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("naive %q: held at the start of a round", n.name)
	}
	return func() error {
		if n.e.dialect != dblock.Postgres {
			_, err := n.e.db.ExecContext(ctx, n.e.sql.naiveDelete, n.name)
			return err
		}
		rows, err := n.e.db.QueryContext(ctx, n.e.sql.naiveReleaseNotify, n.name, n.channel)
		if err != nil {
			return err
		}
		return rows.Close()
	}, nil
}

// wait blocks until the INSERT takes the name. Its own release does not
// notify: nobody waits after it, and a stale notification would only cost
// the next round a spurious try.
func (n *naiveBlocking) wait(ctx context.Context) (func() error, error) {
	release := func() error {
		_, err := n.e.db.ExecContext(ctx, n.e.sql.naiveDelete, n.name)
		return err
	}
	for {
		ok, err := n.tryInsert(ctx)
		if err != nil {
			return nil, err
		}
		if ok {
			return release, nil
		}
		if n.listen == nil {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(naivePoll):
			}
			continue
		}
		err = n.listen.Raw(func(dc any) error {
			_, err := dc.(*stdlib.Conn).Conn().WaitForNotification(ctx)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
}

// waiterKind says how the naive waiter learns of releases, for the table.
func (n *naiveBlocking) waiterKind() string {
	if n.listen != nil {
		return "LISTEN/NOTIFY"
	}
	return fmt.Sprintf("polls every %v", naivePoll)
}
