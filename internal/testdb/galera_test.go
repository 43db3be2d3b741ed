package testdb_test

import (
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock/internal/testdb"
)

// TestGaleraReplicates: the targets are three distinct nodes of one
// cluster, and a row committed on node 1 is read on node 3 by a session
// with wsrep_sync_wait=1.
func TestGaleraReplicates(t *testing.T) {
	if testdb.LeftOut(t, "mysql") {
		return
	}
	ctx := t.Context()
	targets := testdb.Galera(t)
	if len(targets) != 3 {
		t.Fatalf("Galera returned %d targets, want 3", len(targets))
	}
	names := map[string]bool{}
	for _, tg := range targets {
		var name string
		if err := tg.DB.QueryRowContext(ctx, `SELECT @@wsrep_node_name`).Scan(&name); err != nil {
			t.Fatalf("%s: %v", tg.Name, err)
		}
		names[name] = true
	}
	if len(names) != 3 {
		t.Fatalf("node names %v: the targets are not three distinct nodes", names)
	}

	node1, schema := testdb.Isolated(t, targets[0], "galera", nil)
	node3 := testdb.Open(t, targets[2], galeraDSN(t, targets[2], schema))
	if _, err := node1.DB.ExecContext(ctx, `CREATE TABLE probe (id INT PRIMARY KEY, v VARCHAR(64))`); err != nil {
		t.Fatal(err)
	}
	const want = "written on node 1"
	if _, err := node1.DB.ExecContext(ctx, `INSERT INTO probe VALUES (1, ?)`, want); err != nil {
		t.Fatal(err)
	}
	var syncWait int
	var got string
	if err := node3.QueryRowContext(ctx, `SELECT @@wsrep_sync_wait, v FROM probe WHERE id = 1`).Scan(&syncWait, &got); err != nil {
		t.Fatalf("reading node 1's row on node 3: %v", err)
	}
	if syncWait != 1 || got != want {
		t.Fatalf("on node 3: wsrep_sync_wait=%d, v=%q; want 1, %q", syncWait, got, want)
	}
}

// TestGaleraIsolateRejoin: an isolated node refuses queries on tables
// with 1047 while the other two go on as a cluster of 2; once rejoined,
// the cluster is 3 again and the node has what was committed without it.
func TestGaleraIsolateRejoin(t *testing.T) {
	if testdb.LeftOut(t, "mysql") {
		return
	}
	ctx := t.Context()
	targets := testdb.Galera(t)
	node1, schema := testdb.Isolated(t, targets[0], "galera", nil)
	node3 := testdb.Open(t, targets[2], galeraDSN(t, targets[2], schema))
	if _, err := node1.DB.ExecContext(ctx, `CREATE TABLE probe (id INT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}

	testdb.IsolateNode(t, targets[2])
	var myErr *mysql.MySQLError
	if _, err := node3.ExecContext(ctx, `SELECT COUNT(*) FROM probe`); !errors.As(err, &myErr) || myErr.Number != 1047 {
		t.Fatalf("query on the isolated node = %v, want error 1047", err)
	}
	var variable string
	var size int
	if err := targets[0].DB.QueryRowContext(ctx, `SHOW STATUS LIKE 'wsrep_cluster_size'`).Scan(&variable, &size); err != nil || size != 2 {
		t.Fatalf("cluster size on node 1 with node 3 isolated = %d, %v; want 2", size, err)
	}
	if _, err := node1.DB.ExecContext(ctx, `INSERT INTO probe VALUES (1)`); err != nil {
		t.Fatalf("commit on node 1 with node 3 isolated: %v", err)
	}

	testdb.RejoinNode(t, targets[2])
	testdb.WaitSynced(t, targets)
	var n int
	if err := node3.QueryRowContext(ctx, `SELECT COUNT(*) FROM probe WHERE id = 1`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("on node 3 after rejoining, rows committed while it was isolated = %d, %v; want 1", n, err)
	}
}

// galeraDSN is tg's DSN on database schema, with wsrep_sync_wait=1: reads
// wait until the node has applied what the cluster committed before.
func galeraDSN(t *testing.T, tg testdb.Target, schema string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(tg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = schema
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["wsrep_sync_wait"] = "1"
	return cfg.FormatDSN()
}
