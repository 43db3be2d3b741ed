package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func (s postgresStore) wantWake(ctx context.Context, name string, _ holderInfo) (bool, holderInfo, error) {
	h, err := scanHolder(s.db.QueryRowContext(ctx, pgWant, name, s.process))
	if errors.Is(err, sql.ErrNoRows) {
		return false, holderInfo{}, errHoldEnded
	}
	return err == nil, h, err
}

// holder reads the holder of a's name; found is false when the name has
// no row.
func (s postgresStore) holder(ctx context.Context, a attempt) (h holderInfo, found bool, err error) {
	h, err = scanHolder(s.db.QueryRowContext(ctx, pgHolder, a.name, a.host, a.ownerID))
	if errors.Is(err, sql.ErrNoRows) {
		return holderInfo{}, false, nil
	}
	return h, err == nil, err
}

func (s postgresStore) Shorten(ctx context.Context, name string, token, key int64, grace time.Duration) (bool, error) {
	return execOne(ctx, s.db, pgShorten, name, token, key, micros(grace))
}

// AwaitBell is MySQL's: PostgreSQL wakes waiters with NOTIFY.
func (postgresStore) AwaitBell(context.Context, int64, int64, time.Duration, func(bool)) (bool, error) {
	return false, errors.New("rowlock: PostgreSQL has no doorbells")
}

// AwaitMarkerGone asks for the marker in shared mode, in a transaction
// that gives up after wait (lock_timeout): the holder's session holds it
// exclusively, so the request is granted exactly when that session ends,
// and the transaction's end gives it back at once.
//
// The transaction is not bound to ctx, only its statements are: a
// transaction whose context ends is rolled back by a database/sql goroutine
// that may still hold the connection when this returns, and Locker.Close
// must have given every connection back to the pool when it returns.
func (s postgresStore) AwaitMarkerGone(ctx context.Context, key int64, wait time.Duration) (bool, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	q := s.db.On(tx)
	if _, err := q.ExecContext(ctx, `SELECT set_config('lock_timeout', $1, true)`, fmt.Sprintf("%dms", wait.Milliseconds())); err != nil {
		return false, err
	}
	_, err = q.ExecContext(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, key)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available: the wait ran out
		return false, nil
	}
	return err == nil, err
}

func (postgresStore) notifies() bool { return true }

// notify sends a NOTIFY through the pool (the session's round-trip probe).
func (s postgresStore) notify(ctx context.Context, channel, payload string) error {
	_, err := s.db.ExecContext(ctx, "SELECT pg_notify($1, $2)", channel, payload)
	return err
}
