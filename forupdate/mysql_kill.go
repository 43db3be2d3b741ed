package forupdate

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"strconv"
)

// A waiting statement carries a random marker so that it can be found,
// and stopped with KILL QUERY, from another connection: the driver only
// knows how to close the connection, which would leave the server
// waiting for the row lock until innodb_lock_wait_timeout.
const myFindByMarker = `SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND ID <> CONNECTION_ID()`

// killer returns the interrupt of the statement carrying marker: KILL QUERY
// on its connection, found through the process list (a user may see and
// kill its own connections without extra privileges). Not finding a free
// pool connection in time is not a failure: the waiting statement is
// bounded and ends by itself; the next attempt may find one.
func (m *mysql) killer(marker string) func(context.Context) error {
	return func(ctx context.Context) error {
		var id int64
		err := m.db.QueryRowContext(ctx, myFindByMarker, "%"+marker+"%").Scan(&id)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil // not running (yet, or any more)
		case err != nil && ctx.Err() != nil:
			return nil // no connection in time, or the statement returned
		case err != nil:
			return err
		}
		// Sent through even if the statement returns meanwhile: the caller
		// waits for it, so that it cannot reach a later statement.
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interruptTimeout)
		defer cancel()
		// The id comes from the server, not from user input.
		_, err = m.db.ExecContext(kctx, "KILL QUERY "+strconv.FormatInt(id, 10))
		return err
	}
}

// marked prefixes query with a comment holding a random marker.
func marked(query string) (string, string) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	marker := "sqllock:" + hex.EncodeToString(b[:])
	return "/* " + marker + " */ " + query, marker
}
