package forupdate_test

import (
	"errors"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestRefusesSQLite: SQLite has no row locks, so New refuses it, whether
// detected from the driver or given, with ErrNoRowLocks (wrapping
// errors.ErrUnsupported) and no Locker.
func TestRefusesSQLite(t *testing.T) {
	if testdb.LeftOut(t, testdb.SQLiteName) {
		return
	}
	tg := testdb.SQLite(t)
	for what, opts := range map[string][]forupdate.Option{
		"detected": nil,
		"given":    {forupdate.WithDialect(dblock.SQLite)},
	} {
		l, err := forupdate.New(tg.DB, opts...)
		if !errors.Is(err, forupdate.ErrNoRowLocks) || !errors.Is(err, errors.ErrUnsupported) || l != nil {
			t.Errorf("New on SQLite (%s) = %v, %v; want nil, ErrNoRowLocks", what, l, err)
		}
	}
}
