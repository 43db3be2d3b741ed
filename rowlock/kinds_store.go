package rowlock

import (
	"context"
	"database/sql"
	"errors"

	"github.com/sqllock/sqllock/dblock"
)

// kindsStore is the SQL that the lock kinds built from several rows
// (AcquireAll, Semaphore, read/write locks) need beside store's, per
// dialect (kinds_postgres.go, kinds_mysql.go). The rows are taken, renewed
// and released through store, like any lock.
type kindsStore interface {
	// ownerHolds returns which of names o holds now (a live lease, at
	// least one hold).
	ownerHolds(ctx context.Context, names []string, o dblock.Owner) (map[string]bool, error)
	// dropHolds frees name if o holds it: every hold, at once. It undoes
	// a take whose outcome its caller could not learn (its context ended
	// or its connection failed while the statement ran) and that o did
	// not hold before.
	dropHolds(ctx context.Context, name string, o dblock.Owner) error
}

// kinds returns the Locker's kindsStore.
func (l *Locker) kinds() kindsStore {
	if l.cfg.dialect == dblock.Postgres {
		return pgKinds{db: l.db}
	}
	return myKinds{db: l.db}
}

// scanNames collects the first column of rows.
func scanNames(rows *sql.Rows, err error) (map[string]bool, error) {
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			_ = rows.Close()
			return nil, err
		}
		out[name] = true
	}
	return out, errors.Join(rows.Err(), rows.Close())
}
