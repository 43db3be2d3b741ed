package forupdate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// maxRowCreations bounds how often one acquisition creates its row: more
// than once means something keeps deleting it.
const maxRowCreations = 3

// maxDrawRetries bounds how often one acquisition starts over after
// contention while drawing its token; then it counts as contention on the
// lock (TryAcquire: not acquired; Acquire: waits and tries again).
const maxDrawRetries = 8

// take locks the row of key.name on a connection of its own and returns the
// hold, which owns the connection and the transaction from then on.
func (l *Locker) take(ctx context.Context, key holdKey, o dblock.Options, wait bool) (*hold, error) {
	l.d.warm(ctx, l.cfg.connTimeout)
	conn, err := l.conn(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.d.openSession(ctx, conn, o.TTL); err != nil {
		discard(conn)
		return nil, l.acquireError(ctx, key.name, err)
	}
	h, clean, err := l.lockRow(ctx, conn, key, o, wait)
	if err != nil {
		l.endSession(ctx, conn, clean, false)
		return nil, err
	}
	return h, nil
}

// lockRow runs attempts on conn until the row is locked, the context ends,
// or (TryAcquire) someone else holds it. clean is false when the
// connection's state is uncertain and it must not return to the pool.
func (l *Locker) lockRow(ctx context.Context, conn *sql.Conn, key holdKey, o dblock.Options, wait bool) (h *hold, clean bool, err error) {
	created, draws := 0, 0
	contended := false
	for {
		// The transaction outlives Acquire's context: it is the lock.
		txCtx, txCancel := context.WithCancel(context.WithoutCancel(ctx))
		tx, err := conn.BeginTx(txCtx, l.d.txOptions())
		if err != nil {
			txCancel()
			return nil, false, l.acquireError(ctx, key.name, err)
		}
		token, found, interrupted, err := l.d.lock(ctx, lockCall{conn: conn, tx: tx, name: key.name, ttl: o.TTL, wait: wait, contended: contended})
		if err == nil && found && !interrupted {
			return newHold(l, key, token, o.TTL, conn, tx, txCancel), true, nil
		}
		// After an interrupt the statement has returned and the server has
		// been told to stop it; a rollback that succeeds after that proves
		// the session usable. If the interrupt failed, the driver cut the
		// connection and the rollback fails.
		rbErr := tx.Rollback()
		txCancel()
		clean = rbErr == nil || errors.Is(rbErr, sql.ErrTxDone)
		switch {
		case interrupted || ctx.Err() != nil:
			return nil, clean, errors.Join(dblock.ErrNotAcquired, ctx.Err())
		case errors.Is(err, errDrawContention) && clean && draws < maxDrawRetries:
			// The row lock was won: the lock is free, start over.
			draws++
			continue
		case err != nil:
			switch lockkit.ClassifyError(err) {
			case lockkit.ClassLockUnavailable, lockkit.ClassContention:
				// NOWAIT's answer, a deadlock, or a lock wait timeout (the
				// server's, or the bound of a MySQL waiting statement):
				// taken, or try again, waiting.
				if !wait {
					return nil, clean, dblock.ErrNotAcquired
				}
				if clean {
					contended = true
					continue
				}
				// The connection failed too (the rollback did): that is
				// what to report, not contention, which never reaches
				// users.
				return nil, false, l.acquireError(ctx, key.name, rbErr)
			}
			return nil, clean, l.acquireError(ctx, key.name, err)
		case !clean:
			return nil, false, l.acquireError(ctx, key.name, rbErr)
		case !found:
			if created == maxRowCreations {
				return nil, true, fmt.Errorf("forupdate: acquire %q: its row keeps disappearing (rows of %s must never be deleted)", key.name, l.cfg.table)
			}
			created++
			if err := l.d.create(ctx, conn, key.name); err != nil {
				if ctx.Err() != nil {
					return nil, false, errors.Join(dblock.ErrNotAcquired, ctx.Err())
				}
				if lockkit.ClassifyError(err) == lockkit.ClassContention {
					continue
				}
				return nil, false, l.acquireError(ctx, key.name, err)
			}
		}
	}
}

// conn takes a connection from the pool, waiting at most the configured
// connection timeout.
func (l *Locker) conn(ctx context.Context) (*sql.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, l.cfg.connTimeout)
	defer cancel()
	conn, err := l.db.Conn(cctx)
	switch {
	case err == nil:
		return conn, nil
	case ctx.Err() != nil:
		return nil, errors.Join(dblock.ErrNotAcquired, ctx.Err())
	case errors.Is(err, context.DeadlineExceeded):
		s := l.db.Stats()
		return nil, fmt.Errorf("%w within %v (pool: MaxOpenConns %d, %d in use; each held or awaited forupdate lock keeps one): %w",
			ErrNoConnection, l.cfg.connTimeout, s.MaxOpenConnections, s.InUse, err)
	}
	return nil, lockkit.WrapDBError("forupdate: connect", err)
}

func (l *Locker) acquireError(ctx context.Context, name string, err error) error {
	if ctx.Err() != nil {
		return errors.Join(dblock.ErrNotAcquired, ctx.Err())
	}
	return lockkit.WrapDBError(fmt.Sprintf("forupdate: acquire %q", name), err)
}
