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
const Latest = 6

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
// serialized by a database lock. On a Galera cluster, where session locks
// are each node's own, a lease row in LeaseTable serializes them across
// the nodes (docs/galera.md). A schema at a version these migrations do
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
	return runFrom(ctx, db, d, files, string(d), step)
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
//
// On a Galera node the lock is a lease (lease.go), and the files are read
// through galeraFiles (galera.go).
func runFrom(ctx context.Context, db *sql.DB, d dblock.Dialect, fsys fs.FS, dir string, step func(*migrate.Migrate) error) (err error) {
	var cluster *lease
	if d == dblock.MySQL {
		galera, err := lockkit.IsGalera(ctx, db)
		if err != nil {
			return fmt.Errorf("migrations: %w", lockkit.WrapDBError("cluster check", err))
		}
		if galera {
			fsys = galeraFiles{fsys}
			if cluster, err = newLease(); err != nil {
				return fmt.Errorf("migrations: %w", err)
			}
		}
	}
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
	if cluster != nil {
		// However we leave, the lease goes, before conn does.
		defer func() { _ = cluster.release(ctx, conn) }()
	}

	drv, err := newDriver(ctx, conn, d, func(version uint) bool { return hasVersion(src, version) }, cluster)
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
