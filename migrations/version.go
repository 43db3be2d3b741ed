package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// Version reports the schema version (0 when nothing has run) and whether
// the last migration failed half-way (dirty), or a *VersionError.
//
// Version only reads: it takes no lock and creates nothing, so it works on
// a read-only connection (a standby, a user allowed only SELECT), and on a
// database never migrated it reports 0 and leaves it as it was. It reads
// the history row Up writes last, so while Up runs elsewhere it reports
// the version before or after a migration (dirty while one is under way).
func Version(ctx context.Context, db *sql.DB, opts ...Option) (version uint, dirty bool, err error) {
	d, err := resolve(ctx, db, opts)
	if err != nil {
		return 0, false, err
	}
	return readVersion(ctx, db, d)
}

// historyExists asks the catalog, not the table, whether MigrationsTable
// exists in the schema the connection writes to: a failed SELECT is no
// proof of absence (privileges), and on PostgreSQL it would be logged as
// an error by the server.
var historyExists = map[dblock.Dialect]string{
	// to_regclass follows search_path, as the unqualified name in Up does.
	dblock.Postgres: `SELECT to_regclass('` + MigrationsTable + `') IS NOT NULL`,
	dblock.MySQL: `SELECT count(*) > 0 FROM information_schema.tables
WHERE table_schema = DATABASE() AND table_name = '` + MigrationsTable + `'`,
	dblock.SQLite: `SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = '` + MigrationsTable + `'`,
}

func readVersion(ctx context.Context, db *sql.DB, d dblock.Dialect) (uint, bool, error) {
	exists, ok := historyExists[d]
	if !ok {
		return 0, false, fmt.Errorf("migrations: %w: %q", dblock.ErrUnknownDialect, d)
	}
	var found bool
	if err := db.QueryRowContext(ctx, exists).Scan(&found); err != nil {
		return 0, false, fmt.Errorf("migrations: %w", lockkit.WrapDBError("look for "+MigrationsTable, err))
	}
	if !found {
		return 0, false, nil
	}
	var stored int
	var dirty bool
	q := `SELECT version, dirty FROM ` + MigrationsTable + ` LIMIT 1`
	switch err := db.QueryRowContext(ctx, q).Scan(&stored, &dirty); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("migrations: %w", lockkit.WrapDBError("read "+MigrationsTable, err))
	}
	src, err := iofs.New(files, string(d))
	if err != nil {
		return 0, false, fmt.Errorf("migrations: %w", err)
	}
	defer src.Close()
	version, dirty, err := knownVersion(stored, dirty, func(v uint) bool { return hasVersion(src, v) })
	if err != nil {
		return 0, false, fmt.Errorf("migrations: %w", err)
	}
	if version == database.NilVersion {
		// golang-migrate reports its dirty NilVersion as no version.
		return 0, false, nil
	}
	return uint(version), dirty, nil
}
