package migrations

import (
	"bytes"
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/database/multistmt"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// driver is a golang-migrate database.Driver over one *sql.Conn of the
// caller's pool. golang-migrate's own postgres/pgx and mysql drivers close
// the *sql.DB they are given and need multiStatements on MySQL; this one
// does neither.
type driver struct {
	ctx     context.Context
	conn    *sql.Conn
	dialect dialectSQL
	// known reports whether the migration files have a version.
	known func(version uint) bool
	// lease, on a Galera node, is the lock instead of GET_LOCK (lease.go).
	lease *lease
}

// dialectSQL holds the few statements that differ between dialects.
type dialectSQL struct {
	createTable string
	lock        string
	unlock      string
	insert      string
	// held releases one hold of the lock and says whether there was one.
	held string
	// lockTimesOut: the lock statement answers 1 or 0 (MySQL GET_LOCK with
	// a timeout) instead of blocking until it gets the lock.
	lockTimesOut bool
	// lockIsTx: the lock is a write transaction (SQLite's BEGIN IMMEDIATE,
	// ended by COMMIT), inside which the migrations and SetVersion run.
	lockIsTx bool
}

// lockKey names the database lock that serializes concurrent Up calls.
const lockKey = "sqllock_schema_migrations"

var dialects = map[dblock.Dialect]dialectSQL{
	dblock.Postgres: {
		createTable: `CREATE TABLE IF NOT EXISTS ` + MigrationsTable + ` (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)`,
		// hashtext is stable within a server; all Up calls run against the
		// same server, which is all the lock needs.
		lock:   `SELECT pg_advisory_lock(hashtext('` + lockKey + `'))`,
		unlock: `SELECT pg_advisory_unlock(hashtext('` + lockKey + `'))`,
		// Without the lock it returns false, with a warning, which the
		// driver drops.
		held:   `SELECT pg_advisory_unlock(hashtext('` + lockKey + `'))`,
		insert: `INSERT INTO ` + MigrationsTable + ` (version, dirty) VALUES ($1, $2)`,
	},
	dblock.MySQL: {
		createTable:  `CREATE TABLE IF NOT EXISTS ` + MigrationsTable + ` (version BIGINT NOT NULL PRIMARY KEY, dirty BOOLEAN NOT NULL) ENGINE=InnoDB`,
		lock:         `SELECT GET_LOCK('` + lockKey + `', 600)`,
		unlock:       `SELECT RELEASE_LOCK('` + lockKey + `')`,
		held:         `SELECT COALESCE(RELEASE_LOCK('` + lockKey + `'), 0) = 1`,
		insert:       `INSERT INTO ` + MigrationsTable + ` (version, dirty) VALUES (?, ?)`,
		lockTimesOut: true,
	},
	// SQLite has no advisory locks; its one writer at a time is the lock.
	// BEGIN IMMEDIATE takes the write lock at once (waiting out the busy
	// timeout), and SQLite's DDL is transactional. held is not a query:
	// releaseLock rolls back whatever is left open.
	dblock.SQLite: {
		createTable: `CREATE TABLE IF NOT EXISTS ` + MigrationsTable + ` (version INTEGER NOT NULL PRIMARY KEY, dirty INTEGER NOT NULL)`,
		lock:        `BEGIN IMMEDIATE`,
		unlock:      `COMMIT`,
		insert:      `INSERT INTO ` + MigrationsTable + ` (version, dirty) VALUES (?, ?)`,
		lockIsTx:    true,
	},
}

func newDriver(ctx context.Context, conn *sql.Conn, d dblock.Dialect, known func(version uint) bool, lease *lease) (*driver, error) {
	sqls, ok := dialects[d]
	if !ok {
		return nil, fmt.Errorf("%w: %q", dblock.ErrUnknownDialect, d)
	}
	drv := &driver{ctx: ctx, conn: conn, dialect: sqls, known: known, lease: lease}
	if d == dblock.SQLite {
		if err := prepareSQLite(ctx, conn); err != nil {
			return nil, err
		}
	}
	if err := drv.ensureTable(); err != nil {
		return nil, err
	}
	return drv, nil
}

// ensureTable creates the history table under the migration lock.
// PostgreSQL's CREATE TABLE IF NOT EXISTS is not safe against itself: two
// sessions can both find no table, and the loser fails with 23505 (on
// pg_type) or 42P07 instead of doing nothing, which is exactly what several
// replicas starting against a fresh database do. golang-migrate's own
// drivers also lock before creating their table. The table must exist
// before golang-migrate runs, because its Version does not lock.
func (d *driver) ensureTable() (err error) {
	if d.lease != nil {
		if err := d.lease.create(d.ctx, d.conn); err != nil {
			return err
		}
	}
	if err := d.Lock(); err != nil {
		return err
	}
	defer func() {
		if unlockErr := d.Unlock(); err == nil {
			err = unlockErr
		}
	}()
	if _, err := d.conn.ExecContext(d.ctx, d.dialect.createTable); err != nil {
		return lockkit.WrapDBError("create "+MigrationsTable, err)
	}
	return nil
}

func (d *driver) Open(string) (database.Driver, error) {
	return nil, errors.New("migrations: the sqllock driver is only used through Up/Down/Version")
}

// Close does nothing: the connection belongs to run, which returns it to the
// caller's pool, and the *sql.DB belongs to the caller.
func (d *driver) Close() error { return nil }

func (d *driver) Lock() error {
	if d.lease != nil {
		return d.lease.acquire(d.ctx, d.conn)
	}
	var got sql.NullInt64
	if d.dialect.lockTimesOut {
		if err := d.conn.QueryRowContext(d.ctx, d.dialect.lock).Scan(&got); err != nil {
			return &database.Error{OrigErr: err, Err: "lock failed", Query: []byte(d.dialect.lock)}
		}
		if got.Int64 != 1 {
			return database.ErrLocked
		}
		return nil
	}
	if _, err := d.conn.ExecContext(d.ctx, d.dialect.lock); err != nil {
		return &database.Error{OrigErr: err, Err: "lock failed", Query: []byte(d.dialect.lock)}
	}
	return nil
}

func (d *driver) Unlock() error {
	if d.lease != nil {
		return d.lease.release(d.ctx, d.conn)
	}
	// Unlock may run after ctx was canceled; the lock must still go.
	ctx := context.WithoutCancel(d.ctx)
	if _, err := d.conn.ExecContext(ctx, d.dialect.unlock); err != nil {
		return &database.Error{OrigErr: err, Err: "unlock failed", Query: []byte(d.dialect.unlock)}
	}
	return nil
}

// Run executes a migration file one statement at a time. Line comments go
// first, so a ';' in a comment does not split a statement. (sqllock's files
// have no "--" inside string literals.)
func (d *driver) Run(migration io.Reader) error {
	body, err := io.ReadAll(migration)
	if err != nil {
		return err
	}
	var runErr error
	err = multistmt.Parse(bytes.NewReader(stripComments(body)), []byte(";"), 1<<20, func(stmt []byte) bool {
		if len(bytes.TrimSpace(stmt)) == 0 {
			return true
		}
		if _, err := d.conn.ExecContext(d.ctx, string(stmt)); err != nil {
			runErr = &database.Error{OrigErr: err, Err: "migration failed", Query: stmt}
			return false
		}
		return true
	})
	if runErr != nil {
		return runErr
	}
	return err
}

// stripComments drops "--" line comments.
func stripComments(stmt []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(stmt, []byte("\n")) {
		if i := bytes.Index(line, []byte("--")); i >= 0 {
			line = line[:i]
		}
		out = append(out, line...)
		out = append(out, '\n')
	}
	return out
}

func (d *driver) SetVersion(version int, dirty bool) error {
	if d.lease != nil {
		// Before and after each migration: the lease lasts while it runs.
		if err := d.lease.renew(d.ctx, d.conn); err != nil {
			return err
		}
	}
	if d.dialect.lockIsTx {
		// Already in the lock's transaction.
		return d.writeVersion(d.conn, version, dirty)
	}
	tx, err := d.conn.BeginTx(d.ctx, nil)
	if err != nil {
		return &database.Error{OrigErr: err, Err: "transaction start failed"}
	}
	defer func() { _ = tx.Rollback() }()
	if err := d.writeVersion(tx, version, dirty); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return &database.Error{OrigErr: err, Err: "transaction commit failed"}
	}
	return nil
}

// writeVersion replaces the history row, in a transaction.
func (d *driver) writeVersion(tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}, version int, dirty bool) error {
	if _, err := tx.ExecContext(d.ctx, `DELETE FROM `+MigrationsTable); err != nil {
		return &database.Error{OrigErr: err, Query: []byte("DELETE FROM " + MigrationsTable)}
	}
	// golang-migrate's convention: a clean NilVersion is an empty table.
	if version >= 0 || (version == database.NilVersion && dirty) {
		if _, err := tx.ExecContext(d.ctx, d.dialect.insert, version, dirty); err != nil {
			return &database.Error{OrigErr: err, Query: []byte(d.dialect.insert)}
		}
	}
	return nil
}

// prepareSQLite refuses a pool without a busy timeout (see
// lockkit.CheckSQLite) and puts the file in WAL mode, where readers never
// block the one writer: that is persistent in the file, so later
// connections need not ask. An in-memory database stays as it is.
func prepareSQLite(ctx context.Context, conn *sql.Conn) error {
	if err := lockkit.CheckSQLite(ctx, conn); err != nil {
		return err
	}
	var mode string
	if err := conn.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return lockkit.WrapDBError("read journal_mode", err)
	}
	if strings.EqualFold(mode, "wal") || strings.EqualFold(mode, "memory") {
		return nil
	}
	if err := conn.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode); err != nil {
		return lockkit.WrapDBError("set journal_mode WAL", err)
	}
	return nil
}

// Version is the database's version as the migration files know it: a
// *VersionError for a version they do not have, and 1 for foldedVersion
// (see there). golang-migrate reads it under the lock before it migrates.
func (d *driver) Version() (version int, dirty bool, err error) {
	q := `SELECT version, dirty FROM ` + MigrationsTable + ` LIMIT 1`
	err = d.conn.QueryRowContext(d.ctx, q).Scan(&version, &dirty)
	if errors.Is(err, sql.ErrNoRows) {
		return database.NilVersion, false, nil
	}
	if err != nil {
		return 0, false, &database.Error{OrigErr: err, Query: []byte(q)}
	}
	return knownVersion(version, dirty, d.known)
}

// knownVersion is the stored version as the migration files know it (see
// driver.Version).
func knownVersion(version int, dirty bool, known func(version uint) bool) (int, bool, error) {
	switch {
	case version < 0:
		// golang-migrate's dirty NilVersion.
	case known(uint(version)):
	case version == foldedVersion && !dirty:
		return 1, false, nil
	default:
		return 0, false, &VersionError{Version: uint(version), Dirty: dirty}
	}
	return version, dirty, nil
}

// Drop is not offered: sqllock's migrations own only their own tables, and
// Down removes those.
func (d *driver) Drop() error {
	return errors.New("migrations: Drop is not supported; use Down")
}

// releaseLock leaves conn holding no migration lock before it returns to
// the caller's pool: both dialects' locks belong to the session and count
// re-entries, so it releases until the server says there was none. A
// golang-migrate Lock call still running on conn (see lockTimeout) holds
// the connection, so this runs after it. If the server cannot be asked, the
// connection is closed instead, which ends the session and its locks.
func releaseLock(ctx context.Context, conn *sql.Conn, d dblock.Dialect) {
	sqls, ok := dialects[d]
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if sqls.lockIsTx {
		// A lock left held is an open transaction: roll it back. SQLite
		// answers "no transaction is active" when there is none.
		if _, err := conn.ExecContext(ctx, `ROLLBACK`); err == nil || strings.Contains(err.Error(), "no transaction is active") {
			return
		}
		_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
		return
	}
	for range maxLockHolds {
		var wasHeld bool
		if err := conn.QueryRowContext(ctx, sqls.held).Scan(&wasHeld); err != nil {
			break
		}
		if !wasHeld {
			return
		}
	}
	_ = conn.Raw(func(any) error { return sqldriver.ErrBadConn })
}

const (
	// releaseTimeout bounds releaseLock after the caller's context ended.
	releaseTimeout = 30 * time.Second
	// maxLockHolds bounds the releases: the driver takes the lock at most
	// twice (to create the history table, then for golang-migrate).
	maxLockHolds = 8
)
