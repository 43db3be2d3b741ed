package rowlock_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// faultTarget is a target on a schema (PostgreSQL) or database (MySQL) of
// its own, migrated, whose lock and waiter tables fail the first n writes of
// one kind with a deadlock error once armed: contention on demand.
type faultTarget struct {
	testdb.Target
	schema string
}

// isolated returns tg on a schema or database of its own, migrated and
// dropped when the test ends; params are added to the DSN (MySQL: session
// variables such as innodb_lock_wait_timeout).
func isolated(t *testing.T, tg testdb.Target, params map[string]string) faultTarget {
	t.Helper()
	own, schema := testdb.Isolated(t, tg, "sqllock_rowlock", params)
	own.DB.SetMaxOpenConns(20)
	if err := migrations.Up(t.Context(), own.DB); err != nil {
		t.Fatal(err)
	}
	return faultTarget{Target: own, schema: schema}
}

// withFaults is isolated plus the fault triggers, disarmed.
func withFaults(t *testing.T, tg testdb.Target) faultTarget {
	t.Helper()
	ft := isolated(t, tg, nil)
	var stmts []string
	if tg.Dialect == dblock.Postgres {
		// A sequence counts the writes: unlike a table it is not rolled
		// back with the statement the trigger fails.
		s := ft.schema
		stmts = []string{
			`CREATE SEQUENCE ` + s + `.fault_calls`,
			`CREATE TABLE ` + s + `.fault_plan (tbl text NOT NULL, op text NOT NULL, fail_first bigint NOT NULL)`,
			`CREATE FUNCTION ` + s + `.inject_fault() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE lim bigint;
BEGIN
    SELECT fail_first INTO lim FROM ` + s + `.fault_plan WHERE tbl = TG_TABLE_NAME AND op = TG_OP;
    IF lim IS NOT NULL THEN
        IF nextval('` + s + `.fault_calls') <= lim THEN
            RAISE EXCEPTION 'sqllock test: injected deadlock' USING ERRCODE = '40P01';
        END IF;
    END IF;
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW;
END $$`,
			`CREATE TRIGGER inject_fault BEFORE INSERT OR UPDATE OR DELETE ON ` + s + `.dblock_locks
FOR EACH ROW EXECUTE FUNCTION ` + s + `.inject_fault()`,
			`CREATE TRIGGER inject_fault BEFORE INSERT OR UPDATE OR DELETE ON ` + s + `.dblock_waiters
FOR EACH ROW EXECUTE FUNCTION ` + s + `.inject_fault()`,
		}
	} else {
		// A MyISAM table counts the writes: it is not rolled back with the
		// statement the trigger fails. The trigger itself is created by
		// arm: on MariaDB any trigger on a table zeroes the LAST_INSERT_ID
		// that the UPDATE taking a lock reports its token with.
		stmts = []string{`CREATE TABLE fault_plan (tbl varchar(64) NOT NULL, op varchar(16) NOT NULL,
fail_first bigint NOT NULL, calls bigint NOT NULL DEFAULT 0, PRIMARY KEY (tbl, op)) ENGINE=MyISAM`}
	}
	for _, stmt := range stmts {
		if _, err := ft.DB.ExecContext(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return ft
}

// arm makes the next n writes of kind op ("INSERT", "UPDATE", "DELETE") to
// table fail with a deadlock error, and disarms every other fault.
func (ft faultTarget) arm(t testing.TB, table, op string, n int) {
	t.Helper()
	ft.disarm(t)
	stmts := []string{`INSERT INTO fault_plan (tbl, op, fail_first) VALUES ('` + table + `', '` + op + `', ` + fmt.Sprint(n) + `)`}
	if ft.Dialect == dblock.Postgres {
		stmts = append(stmts, `SELECT setval('fault_calls', 1, false)`)
	} else {
		stmts = append(stmts, fmt.Sprintf(`CREATE TRIGGER inject_fault BEFORE %[2]s ON %[1]s FOR EACH ROW BEGIN
    UPDATE fault_plan SET calls = calls + 1 WHERE tbl = '%[1]s' AND op = '%[2]s';
    IF EXISTS (SELECT 1 FROM fault_plan WHERE tbl = '%[1]s' AND op = '%[2]s' AND calls <= fail_first) THEN
        SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'sqllock test: injected deadlock';
    END IF;
END`, table, op))
	}
	for _, stmt := range stmts {
		if _, err := ft.DB.ExecContext(context.Background(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

func (ft faultTarget) disarm(t testing.TB) {
	t.Helper()
	stmts := []string{`DELETE FROM fault_plan`}
	if ft.Dialect == dblock.MySQL {
		stmts = append(stmts, `DROP TRIGGER IF EXISTS inject_fault`)
	}
	for _, stmt := range stmts {
		if _, err := ft.DB.ExecContext(context.Background(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

// fired is how many injected faults the armed plan has raised so far.
func (ft faultTarget) fired(t testing.TB) int {
	t.Helper()
	q := `SELECT LEAST(calls, fail_first) FROM fault_plan`
	if ft.Dialect == dblock.Postgres {
		q = `SELECT LEAST(CASE WHEN is_called THEN last_value ELSE 0 END, (SELECT fail_first FROM fault_plan)) FROM fault_calls`
	}
	var n int
	if err := ft.DB.QueryRowContext(context.Background(), q).Scan(&n); err != nil {
		t.Fatalf("fired: %v", err)
	}
	return n
}
