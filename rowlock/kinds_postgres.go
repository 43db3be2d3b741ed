package rowlock

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"github.com/sqllock/sqllock/dblock"
)

// pgKinds is kindsStore on PostgreSQL.
type pgKinds struct{ db *sql.DB }

const (
	// pgOwnerHolds: $1 owner_host, $2 owner_id, then the names.
	pgOwnerHolds = `
SELECT name FROM ` + locksTable + `
WHERE owner_host = $1 AND owner_id = $2 AND hold_count > 0 AND expires_at > clock_timestamp()
  AND name IN (%s)`

	// pgDropHolds frees the row at once, MinHold or not: its holder never
	// learned it held it. A waiter of another process that asked for a
	// NOTIFY gets one, as from a release.
	pgDropHolds = `
UPDATE ` + locksTable + `
SET hold_count = 0, expires_at = clock_timestamp()
WHERE name = $1 AND owner_host = $2 AND owner_id = $3 AND hold_count > 0 AND expires_at > clock_timestamp()
RETURNING CASE WHEN wanted THEN pg_notify('` + releaseChannel + `', name) END`
)

// pgPlaceholders returns n placeholders numbered from first: "$3, $4".
func pgPlaceholders(first, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("$" + strconv.Itoa(first+i))
	}
	return b.String()
}

// withNames appends names to args, for a statement's IN list.
func withNames(args []any, names []string) []any {
	for _, name := range names {
		args = append(args, name)
	}
	return args
}

func (s pgKinds) ownerHolds(ctx context.Context, names []string, o dblock.Owner) (map[string]bool, error) {
	// Only numbered placeholders are spliced in: names travel as arguments.
	query := strings.Replace(pgOwnerHolds, "%s", pgPlaceholders(3, len(names)), 1)
	return scanNames(s.db.QueryContext(ctx, query, withNames([]any{o.Host, o.ID}, names)...))
}

func (s pgKinds) dropHolds(ctx context.Context, name string, o dblock.Owner) error {
	_, err := s.db.ExecContext(ctx, pgDropHolds, name, o.Host, o.ID)
	return err
}
