package forupdate

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"strconv"
	"time"
)

// mysql: the server timeout is the session's wait_timeout, set before the
// transaction begins and restored before the connection returns to the
// pool (two short statements: MySQL has no transaction-local variables).
// Tokens come from an AUTO_INCREMENT counter, which no rollback undoes (and
// which MySQL 8.0 and MariaDB 10.2.4+ keep across restarts). One statement
// locks and draws: REPLACE ... SELECT ... FOR UPDATE reads the lock row
// with a locking read, waiting for it, and only then inserts the name's
// counter row, allocating its value; LAST_INSERT_ID hands it back in the
// OK packet (MySQL 8.0 has no RETURNING).
type mysql struct {
	db                           *sql.DB
	lockWait, lockTry, insertRow string
}

// maxWaitTimeout is the largest wait_timeout MySQL accepts (one year).
const maxWaitTimeout = 31536000

const (
	mySaveAndSetTimeout = `SET @sqllock_wait_timeout = @@SESSION.wait_timeout, SESSION wait_timeout = `
	myRestoreTimeout    = `SET SESSION wait_timeout = @sqllock_wait_timeout, @sqllock_wait_timeout = NULL`
	// A waiting statement carries a random marker so that it can be found,
	// and stopped with KILL QUERY, from another connection: the driver only
	// knows how to close the connection, which would leave the server
	// waiting for the row lock until innodb_lock_wait_timeout.
	myFindByMarker = `SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND ID <> CONNECTION_ID()`
)

func newMySQL(db *sql.DB, table, counter string) *mysql {
	lock := func(wait string) string {
		// Only the holder of a name writes its counter row: no waits there.
		return `REPLACE INTO ` + counter + ` (name) SELECT name FROM ` + table + ` WHERE name = ? FOR UPDATE` + wait
	}
	return &mysql{
		db:       db,
		lockWait: lock(""),
		lockTry:  lock(" NOWAIT"),
		// IGNORE: no duplicate-key error. It waits for the row lock when the
		// row exists and is held, which happens only when another process
		// created and took the row since this one found it missing.
		insertRow: `INSERT IGNORE INTO ` + table + ` (name) VALUES (?)`,
	}
}

func (*mysql) openSession(ctx context.Context, conn *sql.Conn, ttl time.Duration) error {
	seconds := min(max(int64((ttl+time.Second-1)/time.Second), 1), maxWaitTimeout)
	// An integer computed here, not user input.
	_, err := conn.ExecContext(ctx, mySaveAndSetTimeout+strconv.FormatInt(seconds, 10))
	return err
}

func (*mysql) closeSession(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, myRestoreTimeout)
	return err
}

// The server's default isolation: any level works for locking reads, and
// asking for one costs go-sql-driver an extra statement.
func (*mysql) txOptions() *sql.TxOptions { return nil }

func (m *mysql) lock(ctx context.Context, c lockCall) (token int64, found, interrupted bool, err error) {
	var res sql.Result
	if c.wait {
		query, marker := marked(m.lockWait)
		interrupted, err = runInterruptible(ctx, m.killer(marker), func(ctx context.Context) (err error) {
			res, err = c.tx.ExecContext(ctx, query, c.name)
			return err
		})
	} else {
		res, err = c.tx.ExecContext(ctx, m.lockTry, c.name)
	}
	if err != nil || interrupted {
		return 0, false, interrupted, err
	}
	// 0 rows: no lock row to read; 1: the counter row was created; 2: it
	// was replaced.
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, false, false, err
	}
	token, err = res.LastInsertId()
	return token, err == nil, false, err
}

func (m *mysql) create(ctx context.Context, conn *sql.Conn, name string) error {
	query, marker := marked(m.insertRow)
	_, err := runInterruptible(ctx, m.killer(marker), func(ctx context.Context) error {
		_, err := conn.ExecContext(ctx, query, name)
		return err
	})
	return err
}

func (*mysql) ping(ctx context.Context, dc any) (pingOutcome, error) {
	// go-sql-driver's IsValid is false while unread result data is
	// buffered; COM_PING answers without touching the transaction.
	return pingDriver(ctx, dc)
}

func (*mysql) rolledBack(error) bool { return false }

// killer returns the interrupt of the statement carrying marker: KILL QUERY
// on its connection, found through the process list (a user may see and
// kill its own connections without extra privileges).
func (m *mysql) killer(marker string) func(context.Context) error {
	return func(ctx context.Context) error {
		var id int64
		err := m.db.QueryRowContext(ctx, myFindByMarker, "%"+marker+"%").Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // not running (yet, or any more)
		}
		if err != nil {
			return err
		}
		// The id comes from the server, not from user input.
		_, err = m.db.ExecContext(ctx, "KILL QUERY "+strconv.FormatInt(id, 10))
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
