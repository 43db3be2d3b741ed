package lockkit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/sqllock/sqllock/dblock"
)

// sqliteCoder is modernc.org/sqlite's *Error, matched by method so that no
// library package links SQLite into binaries that do not use it.
type sqliteCoder interface {
	error
	Code() int
}

// SQLite's primary result codes (the low byte of an extended code).
const (
	sqliteError    = 1
	sqliteBusy     = 5
	sqliteLocked   = 6
	sqliteReadOnly = 8
	sqliteCantOpen = 14
)

// classifySQLite sorts an SQLite error. BUSY and LOCKED mean another
// connection writes for longer than the busy timeout: contention, retried
// or "not acquired", never shown as SQLITE_BUSY. CANTOPEN ("unable to open
// database file": a missing directory, no permission, a file gone from a
// network mount) is SQLite's unreachable server.
func classifySQLite(err error) (ErrorClass, bool) {
	var e sqliteCoder
	if !errors.As(err, &e) {
		return ClassOther, false
	}
	switch e.Code() & 0xff {
	case sqliteBusy, sqliteLocked:
		return ClassContention, true
	case sqliteReadOnly:
		return ClassReadOnly, true
	case sqliteCantOpen:
		return ClassUnavailable, true
	case sqliteError:
		if strings.Contains(e.Error(), "no such table: dblock_") {
			return ClassMissingTable, true
		}
	}
	return ClassOther, true
}

// SQLiteSetup is the DSN parameter every SQLite pool sqllock uses must
// carry: SQLite has one writer at a time, and without a busy timeout a
// writer that finds the file locked fails at once with SQLITE_BUSY instead
// of waiting its turn. (journal_mode(WAL), which migrations.Up sets, is
// persistent in the file.)
const SQLiteSetup = "_pragma=busy_timeout(5000)"

// CheckSQLite reports, as dblock.ErrInvalidDB, a connection of db whose
// busy timeout is 0. sqllock never changes the settings of the caller's
// connections: the DSN sets them for every connection of the pool.
func CheckSQLite(ctx context.Context, db interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) error {
	var ms int64
	if err := db.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&ms); err != nil {
		return WrapDBError("read busy_timeout", err)
	}
	if ms <= 0 {
		return fmt.Errorf("%w: SQLite busy_timeout is 0, so contending processes would fail with SQLITE_BUSY: add %s to the DSN (for example file:locks.db?%s&_pragma=journal_mode(WAL))",
			dblock.ErrInvalidDB, SQLiteSetup, SQLiteSetup)
	}
	return nil
}
