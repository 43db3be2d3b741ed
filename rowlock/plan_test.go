package rowlock

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestMySQLWaiterSubqueriesUseNameIndex: the fair-queue check in the take
// and insert statements must look waiters up by (name, id). Left to
// itself MariaDB plans "w.name = ? AND w.id < ?" as a range over the
// primary key, which for an unqueued acquirer (id = the largest bigint)
// reads every waiter row of every name on every acquire.
func TestMySQLWaiterSubqueriesUseNameIndex(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		if tg.Dialect != dblock.MySQL {
			continue // PostgreSQL's statements have no index hint to check
		}
		t.Run(tg.Name, func(t *testing.T) {
			a := attempt{name: testdb.Name(t), host: "h", ownerID: "o"}
			ttl := micros(dblock.DefaultTTL)
			for _, st := range []struct {
				name  string
				query string
				args  []any
			}{
				{"take", myTake, []any{a.note, 0, a.host, a.ownerID, 0, 0, a.name, a.queueID(), ttl, ttl, a.name, a.name, a.queueID(), a.host, a.ownerID}},
				{"insert", myInsert, []any{a.name, 0, 1, a.host, a.ownerID, a.note, 0, ttl, 0, 1, a.name, a.queueID()}},
			} {
				key := explainKey(t, tg.DB, st.query, "w", st.args...)
				if key != "dblock_waiters_name_id" {
					t.Errorf("%s: waiters looked up by %q, want dblock_waiters_name_id", st.name, key)
				}
			}
		})
	}
}

// explainKey returns the index MySQL's EXPLAIN says query uses for table.
func explainKey(t *testing.T, db *sql.DB, query, table string, args ...any) string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "EXPLAIN "+query, args...)
	if err != nil {
		t.Fatalf("EXPLAIN: %v", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[strings.ToLower(c)] = vals[i].String
		}
		if row["table"] == table {
			return row["key"]
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("EXPLAIN has no row for table %q", table)
	return ""
}
