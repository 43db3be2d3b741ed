package migrations

import (
	"fmt"

	"github.com/sqllock/sqllock/dblock"
)

// foldedVersion is the last of the nine migrations that version 1 replaced
// before the first release. Its schema is version 1's (a test compares the
// catalogs), so a database that a development build left clean at that
// version is taken to be at version 1, without a write: checkouts from
// before the fold may share the database. Once version 2 runs on it, the
// history says 2. The alias holds only while these migrations have no
// version of that number.
const foldedVersion = 9

// VersionError is returned by Up, Down and Version when the database's
// schema version is one these migrations do not have. It was made by a
// newer sqllock, or by a development build from before version 1 replaced
// the first nine migrations (see the package doc). errors.Is(err,
// dblock.ErrSchemaMissing) holds for it: sqllock's tables must be made
// again.
type VersionError struct {
	Version uint // the database's, from MigrationsTable
	Dirty   bool // the migration to Version failed half-way
}

func (e *VersionError) Error() string {
	dirty := ""
	if e.Dirty {
		dirty = " (dirty)"
	}
	return fmt.Sprintf("the schema is at version %d%s, which these migrations (latest %d) do not have: "+
		"made by a newer sqllock (use that), or by a development build from before the first release "+
		"(drop sqllock's tables and %s, then run Up or `sqllock migrate up`)", e.Version, dirty, Latest, MigrationsTable)
}

// Unwrap returns dblock.ErrSchemaMissing.
func (e *VersionError) Unwrap() error { return dblock.ErrSchemaMissing }
