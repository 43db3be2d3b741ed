// Package migrations creates and drops sqllock's tables with golang-migrate,
// from SQL files embedded in the binary.
//
// The history is kept in its own table (MigrationsTable), so it never mixes
// with the application's golang-migrate history. Up runs on one connection
// borrowed from the caller's *sql.DB and returns it; it never closes the
// *sql.DB (golang-migrate's own drivers do), and MySQL files are split into
// statements here, so the DSN needs no multiStatements=true.
//
// Teams that run goose, Atlas or Flyway can take the same files from Files.
//
// On SQLite the migration lock is the file's write lock (BEGIN IMMEDIATE,
// held while migrating), the pool's DSN must set a busy timeout
// (_pragma=busy_timeout(5000); Up fails with dblock.ErrInvalidDB without
// one), and Up puts the file in WAL mode, which stays with the file. The
// SQLite schema has the lock tables and no forupdate tables.
//
// # Versions
//
// Version 1 creates the whole schema; changes after it come as new
// migrations, and released files are never edited. Before the first
// release the schema grew through nine migrations, which version 1
// replaced: it creates exactly the schema their version 9 left. Databases
// migrated by such development builds get no upgrade path, as nothing was
// released, with one exception that costs nothing: a database left clean
// at version 9 has version 1's tables, so it is taken to be at version 1
// (its history row is rewritten by the next migration that runs). At any
// other of those versions Up, Down and Version return a *VersionError:
// drop sqllock's tables and MigrationsTable, then run Up.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// MigrationsTable records which of sqllock's migrations have run.
const MigrationsTable = "sqllock_schema_migrations"

// Latest is the version Up migrates to.
const Latest = 4

// lockTimeout is how long golang-migrate waits for the driver's Lock before
// it gives up. It gives up by returning, not by stopping Lock, which goes on
// waiting for the database lock and, once it has it, holds it with nobody
// left to release it: the connection would return to the caller's pool
// holding a session lock that blocks every later Up. So golang-migrate
// never gives up: Lock waits on the caller's context instead, which cancels
// it properly. (A variable only so that a test can show the cleanup in run
// copes even so.)
var lockTimeout = time.Duration(math.MaxInt64)

//go:embed postgres/*.sql mysql/*.sql sqlite/*.sql
var files embed.FS

// Files returns the migration files of a dialect, named as golang-migrate
// expects (000001_init.up.sql, ...).
func Files(d dblock.Dialect) (fs.FS, error) {
	if !d.Valid() {
		return nil, fmt.Errorf("migrations: %w: %q", dblock.ErrUnknownDialect, d)
	}
	return fs.Sub(files, string(d))
}

// Option configures Up, Down and Version.
type Option func(*config)

type config struct{ dialect dblock.Dialect }

// WithDialect sets the SQL dialect of db. Default: detected from db's
// driver (pgx, lib/pq, go-sql-driver/mysql, modernc.org/sqlite), as
// rowlock.New does; give it for another driver. A dialect that contradicts the driver is
// dblock.ErrUnknownDialect.
func WithDialect(d dblock.Dialect) Option { return func(c *config) { c.dialect = d } }

// Up creates or upgrades sqllock's tables to Latest. Running it again is a
// no-op; concurrent calls (from several replicas starting at once) are
// serialized by a database lock. A schema at a version these migrations do
// not have gets a *VersionError (see Versions above), and so does Down.
func Up(ctx context.Context, db *sql.DB, opts ...Option) error {
	return run(ctx, db, opts, func(m *migrate.Migrate) error { return m.Up() })
}

// Down drops sqllock's tables, and every lock and waiter in them.
func Down(ctx context.Context, db *sql.DB, opts ...Option) error {
	return run(ctx, db, opts, func(m *migrate.Migrate) error { return m.Down() })
}

func run(ctx context.Context, db *sql.DB, opts []Option, step func(*migrate.Migrate) error) error {
	d, err := resolve(ctx, db, opts)
	if err != nil {
		return err
	}
	var fsys fs.FS = files
	if d == dblock.MySQL {
		galera, err := lockkit.IsGalera(ctx, db)
		if err != nil {
			return fmt.Errorf("migrations: %w", lockkit.WrapDBError("cluster check", err))
		}
		if galera {
			fsys = galeraFiles{files} // see galera.go
		}
	}
	return runFrom(ctx, db, d, fsys, string(d), step)
}

// resolve checks ctx and opts and returns db's dialect.
func resolve(ctx context.Context, db *sql.DB, opts []Option) (dblock.Dialect, error) {
	var cfg config
	for _, opt := range opts {
		if opt == nil {
			return "", fmt.Errorf("migrations: %w", &dblock.OptionError{Option: "Option", Reason: "nil option"})
		}
		opt(&cfg)
	}
	if err := lockinput.CheckContext(ctx); err != nil {
		return "", fmt.Errorf("migrations: %w", err)
	}
	d, err := lockkit.ResolveDialect(db, cfg.dialect)
	if err != nil {
		return "", fmt.Errorf("migrations: %w", err)
	}
	return d, nil
}

// runFrom is run with the migration files of dir in fsys (a test runs
// other files than sqllock's own).
func runFrom(ctx context.Context, db *sql.DB, d dblock.Dialect, fsys fs.FS, dir string, step func(*migrate.Migrate) error) (err error) {
	src, err := iofs.New(fsys, dir)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrations: %w", lockkit.WrapDBError("connect", err))
	}
	// The connection goes back to the caller's pool however we leave, and
	// never holding the migration lock (see lockTimeout).
	defer conn.Close()
	defer releaseLock(ctx, conn, d)

	drv, err := newDriver(ctx, conn, d, func(version uint) bool { return hasVersion(src, version) })
	if err != nil {
		_ = src.Close()
		return fmt.Errorf("migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "sqllock-"+string(d), drv)
	if err != nil {
		_ = src.Close()
		return fmt.Errorf("migrations: %w", err)
	}
	m.LockTimeout = lockTimeout
	// golang-migrate checks GracefulStop between migrations; the statements
	// themselves are canceled through ctx by the driver.
	stop := context.AfterFunc(ctx, func() {
		select {
		case m.GracefulStop <- true:
		default:
		}
	})
	defer stop()
	defer func() {
		srcErr, dbErr := m.Close()
		if err == nil {
			err = errors.Join(srcErr, dbErr)
		}
	}()
	err = step(m)
	if errors.Is(err, migrate.ErrNoChange) {
		err = nil
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = errors.Join(err, ctxErr)
		}
		return fmt.Errorf("migrations: %w", err)
	}
	return nil
}

// hasVersion reports whether src has an up or a down migration of version.
func hasVersion(src source.Driver, version uint) bool {
	for _, read := range []func(uint) (io.ReadCloser, string, error){src.ReadUp, src.ReadDown} {
		if r, _, err := read(version); err == nil {
			_ = r.Close()
			return true
		}
	}
	return false
}
