package migrations_test

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// catalogQueries read what a schema is made of, each row as one line. They
// run on the schema (PostgreSQL) or database (MySQL) of the connection and
// name no schema in their rows, so that two schemas' rows compare equal.
var catalogQueries = map[dblock.Dialect][]struct{ name, query string }{
	dblock.Postgres: {
		{"relations", `SELECT c.relname, c.relkind::text, c.relpersistence::text, coalesce(array_to_string(c.reloptions, ','), '')
FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace ORDER BY 1`},
		{"columns", `SELECT table_name, column_name, ordinal_position, column_default, is_nullable, data_type,
    character_maximum_length, numeric_precision, numeric_scale, datetime_precision, collation_name,
    is_identity, identity_generation, identity_start, identity_increment, identity_maximum, identity_minimum,
    identity_cycle, is_generated, generation_expression
FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY 1, 3`},
		{"indexes", `SELECT tablename, indexname, replace(indexdef, schemaname || '.', '')
FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 1, 2`},
		// pg_constraint, not information_schema.table_constraints: the
		// latter names NOT NULL checks after the schema's oid.
		{"constraints", `SELECT t.relname, c.conname, c.contype::text, pg_get_constraintdef(c.oid)
FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid
WHERE c.connamespace = current_schema()::regnamespace ORDER BY 1, 2`},
		{"sequences", `SELECT sequencename, data_type::text, start_value, min_value, max_value, increment_by, cycle, cache_size
FROM pg_sequences WHERE schemaname = current_schema() ORDER BY 1`},
		{"sequence owners", `SELECT s.relname, t.relname, a.attname, d.deptype::text
FROM pg_depend d
JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
JOIN pg_class t ON t.oid = d.refobjid
JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
WHERE s.relnamespace = current_schema()::regnamespace ORDER BY 1`},
		{"triggers", `SELECT event_object_table, trigger_name, action_timing, event_manipulation, action_statement
FROM information_schema.triggers WHERE trigger_schema = current_schema() ORDER BY 1, 2, 4`},
	},
	dblock.MySQL: {
		// No AUTO_INCREMENT: a counter's state, not its shape.
		{"tables", `SELECT TABLE_NAME, TABLE_TYPE, ENGINE, ROW_FORMAT, TABLE_COLLATION, CREATE_OPTIONS, TABLE_COMMENT
FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() ORDER BY 1`},
		{"columns", `SELECT TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, COLUMN_DEFAULT, IS_NULLABLE, COLUMN_TYPE,
    CHARACTER_SET_NAME, COLLATION_NAME, COLUMN_KEY, EXTRA, GENERATION_EXPRESSION, COLUMN_COMMENT
FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() ORDER BY 1, 3`},
		{"statistics", `SELECT TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, NON_UNIQUE, COLLATION, SUB_PART,
    NULLABLE, INDEX_TYPE, INDEX_COMMENT
FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() ORDER BY 1, 2, 3`},
		{"constraints", `SELECT TABLE_NAME, CONSTRAINT_NAME, CONSTRAINT_TYPE
FROM information_schema.TABLE_CONSTRAINTS WHERE TABLE_SCHEMA = DATABASE() ORDER BY 1, 2`},
		{"triggers", `SELECT EVENT_OBJECT_TABLE, TRIGGER_NAME, ACTION_TIMING, EVENT_MANIPULATION, ACTION_STATEMENT
FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() ORDER BY 1, 2, 4`},
	},
}

// catalog reads db's schema: the rows of catalogQueries, then on MySQL
// each table's SHOW CREATE TABLE and each sequence's SHOW CREATE SEQUENCE
// (MariaDB 10.11 has no information_schema.SEQUENCES), which carry what
// the information_schema leaves out (a sequence's CACHE, a table's
// options).
func catalog(t *testing.T, db *sql.DB, d dblock.Dialect) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, q := range catalogQueries[d] {
		out[q.name] = queryLines(t, db, q.query)
	}
	if d != dblock.MySQL {
		return out
	}
	for _, table := range queryLines(t, db, `SELECT CONCAT(TABLE_TYPE, '|', TABLE_NAME)
FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME`) {
		kind, name, _ := strings.Cut(table, "|")
		show := "SHOW CREATE TABLE "
		if kind == "SEQUENCE" {
			show = "SHOW CREATE SEQUENCE "
		}
		// The name comes from the catalog of a schema the test made.
		var got, ddl string
		if err := db.QueryRowContext(t.Context(), show+"`"+name+"`").Scan(&got, &ddl); err != nil {
			t.Fatalf("%s%s: %v", show, name, err)
		}
		out[show+name] = strings.Split(ddl, "\n")
	}
	return out
}

// queryLines runs query and returns each row as its columns joined by
// " | ", NULL written as NULL.
func queryLines(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		fields := make([]string, len(vals))
		for i, v := range vals {
			fields[i] = "NULL"
			if v.Valid {
				fields[i] = v.String
			}
		}
		lines = append(lines, strings.Join(fields, " | "))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return lines
}

// catalogDiff lists, per catalog query, the lines only want has and the
// lines only got has; empty when the catalogs are equal.
func catalogDiff(want, got map[string][]string) []string {
	var diff []string
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		for _, line := range want[name] {
			if !slices.Contains(got[name], line) {
				diff = append(diff, fmt.Sprintf("%s: only the history has: %s", name, line))
			}
		}
		for _, line := range got[name] {
			if !slices.Contains(want[name], line) {
				diff = append(diff, fmt.Sprintf("%s: only version 1 has: %s", name, line))
			}
		}
	}
	return diff
}

// TestFoldedSchema: version 1 makes the schema that the nine migrations it
// replaced made, on the server at hand (MariaDB or MySQL 8.0 take
// different branches of both), as the catalogs tell it: tables and their
// storage options, columns, indexes, constraints, sequences. A change to
// either side, or a catalog query that reads nothing, fails it.
func TestFoldedSchema(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			historyDB, _ := isolated(t, tg)
			if err := migrations.UpHistory(ctx, historyDB, tg.Dialect); err != nil {
				t.Fatalf("the replaced migrations: %v", err)
			}
			foldedDB, _ := isolated(t, tg)
			if err := migrations.UpTo(ctx, foldedDB, tg.Dialect, 1); err != nil {
				t.Fatalf("Up to version 1: %v", err)
			}
			history, folded := catalog(t, historyDB, tg.Dialect), catalog(t, foldedDB, tg.Dialect)
			for name, lines := range history {
				if len(lines) == 0 && name != "triggers" {
					t.Errorf("catalog %q read nothing from the history's schema", name)
				}
			}
			for _, line := range catalogDiff(history, folded) {
				t.Error(line)
			}
		})
	}
}
