package lockkit

import (
	"context"
	"database/sql"
	"errors"
	"strings"
)

// GaleraQuery answers one row (name, value) on a MariaDB server, whose
// value is ON on a node of a Galera cluster (MariaDB Galera, Percona
// XtraDB Cluster), and no row on MySQL.
const GaleraQuery = "SHOW GLOBAL VARIABLES LIKE 'wsrep_on'"

// IsGaleraAnswer reads GaleraQuery's answer: its error (sql.ErrNoRows for
// none) and value.
func IsGaleraAnswer(value string, err error) (bool, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return strings.EqualFold(value, "ON"), nil
}

// IsGalera reports whether db is a node of a Galera cluster. On such a
// cluster GET_LOCK, IS_FREE_LOCK and row locks (FOR UPDATE, FOR SHARE)
// are each node's own: a lock that depends on them holds only among the
// clients of one node.
func IsGalera(ctx context.Context, db interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) (bool, error) {
	var name, value string
	err := db.QueryRowContext(ctx, GaleraQuery).Scan(&name, &value)
	return IsGaleraAnswer(value, err)
}
