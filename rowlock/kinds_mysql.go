package rowlock

import (
	"context"
	"database/sql"
	"strings"

	"github.com/sqllock/sqllock/dblock"
)

// myKinds is kindsStore on MySQL and MariaDB.
type myKinds struct{ db *sql.DB }

const (
	// myOwnerHolds: owner_host, owner_id, then the names.
	myOwnerHolds = `
SELECT name FROM ` + locksTable + `
WHERE owner_host = ? AND owner_id = ? AND hold_count > 0 AND expires_at > UTC_TIMESTAMP(6)
  AND name IN (%s)`

	// myDropHolds frees the row at once, MinHold or not (see pgDropHolds).
	// expires_at is assigned before hold_count so it reads the old count.
	myDropHolds = `
UPDATE ` + locksTable + `
SET expires_at = UTC_TIMESTAMP(6), hold_count = 0
WHERE name = ? AND owner_host = ? AND owner_id = ? AND hold_count > 0 AND expires_at > UTC_TIMESTAMP(6)`
)

func (s myKinds) ownerHolds(ctx context.Context, names []string, o dblock.Owner) (map[string]bool, error) {
	// Only placeholders are spliced in: names travel as arguments.
	query := strings.Replace(myOwnerHolds, "%s", placeholders(len(names)), 1)
	return scanNames(s.db.QueryContext(ctx, query, withNames([]any{o.Host, o.ID}, names)...))
}

func (s myKinds) dropHolds(ctx context.Context, name string, o dblock.Owner) error {
	_, err := s.db.ExecContext(ctx, myDropHolds, name, o.Host, o.ID)
	return err
}
