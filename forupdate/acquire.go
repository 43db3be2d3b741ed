package forupdate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// take locks the row of req (of key.name, or a semaphore's slot) on a
// connection of its own and returns the hold, which owns the connection
// and the transaction from then on.
func (l *Locker) take(ctx context.Context, req request, key holdKey, o dblock.Options, wait bool) (*hold, error) {
	l.d.warm(ctx, l.cfg.connTimeout, req)
	conn, err := l.conn(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.d.openSession(ctx, conn, o.TTL); err != nil {
		discard(conn)
		return nil, l.acquireError(ctx, key.name, err)
	}
	call := lockCall{conn: conn, name: key.name, ttl: o.TTL, wait: wait, share: req.kind == kindRead}
	var h *hold
	clean := false
	if req.kind == kindPermit {
		s := semLocking{l: l, key: key, req: req, call: call}
		h, err = s.lock(ctx)
		clean = s.clean
	} else {
		r := rowLocking{l: l, key: key, req: req, call: call}
		h, err = r.lock(ctx)
		clean = r.clean
	}
	if err != nil {
		l.endSession(ctx, conn, clean, false)
		return nil, err
	}
	return h, nil
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
