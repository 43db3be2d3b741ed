package rowlock

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"time"

	"github.com/sqllock/sqllock/internal/wake"
)

func (s mysqlStore) Shorten(ctx context.Context, name string, token, key int64, grace time.Duration) (bool, error) {
	return execOne(ctx, s.db, myShorten, micros(grace), name, token, key)
}

// AwaitMarkerGone waits on the marker's GET_LOCK name on a connection of
// its own: the server grants it exactly when the holder's session ends,
// and it is released at once. GET_LOCK's timeout is in whole seconds.
func (s mysqlStore) AwaitMarkerGone(ctx context.Context, key int64, wait time.Duration) (gone bool, err error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	name := wake.MarkerName(key)
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, ?)`, name, max(1, int64(wait/time.Second))).Scan(&got); err != nil {
		return false, err
	}
	if got.Int64 != 1 {
		return false, nil // timed out (0), or an error (NULL): alive, as far as we know
	}
	var released sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT RELEASE_LOCK(?)`, name).Scan(&released); err != nil {
		// Never hand a connection that may hold the name back to the
		// pool: its end frees the name.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return true, nil
}

func (mysqlStore) notifies() bool { return false }
