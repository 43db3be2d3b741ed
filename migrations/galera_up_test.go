package migrations_test

import (
	"database/sql"
	"sync"

	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// TestGaleraUp: on a database of its own on a Galera cluster, Up from
// scratch on one node migrates the cluster: another node reports the latest
// version, not dirty, and Down then Up again work. Version 1 failed there
// (a cached sequence, error 1235) and was left dirty.
func TestGaleraUp(t *testing.T) {
	if testdb.LeftOut(t, "mysql") {
		return
	}
	nodes := testdb.Galera(t)
	ctx := t.Context()
	params := map[string]string{"wsrep_sync_wait": "1"} // reads see what other nodes committed
	first, _ := testdb.Isolated(t, nodes[0], "sqllock_galera", params)
	if err := migrations.Up(ctx, first.DB); err != nil {
		t.Fatalf("Up on %s: %v", nodes[0].Name, err)
	}
	other := testdb.Open(t, nodes[2], withDatabase(t, nodes[2].DSN, first.DSN))
	v, dirty, err := migrations.Version(ctx, other)
	if err != nil || dirty || v != migrations.Latest {
		t.Fatalf("Version on %s = %d, dirty %v, %v; want %d, clean", nodes[2].Name, v, dirty, err, migrations.Latest)
	}
	if err := migrations.Down(ctx, other); err != nil {
		t.Fatalf("Down on %s: %v", nodes[2].Name, err)
	}
	if err := migrations.Up(ctx, other); err != nil {
		t.Fatalf("Up again on %s: %v", nodes[2].Name, err)
	}
}

// withDatabase is the DSN of isolated (its database and parameters) on
// node's server.
func withDatabase(t *testing.T, node, isolated string) string {
	t.Helper()
	n, err := mysql.ParseDSN(node)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(isolated)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Net, cfg.Addr = n.Net, n.Addr
	return cfg.FormatDSN()
}

// TestGaleraUpSerializes: Up started at once on the three nodes of a Galera
// cluster, on a fresh database: exactly one runs the migrations, the others
// wait for it and find the schema current, and the history is clean at
// Latest on every node. GET_LOCK, the lock on a single server, is each
// node's own: every node got it and migrated at once.
func TestGaleraUpSerializes(t *testing.T) {
	if testdb.LeftOut(t, "mysql") {
		return
	}
	nodes := testdb.Galera(t)
	ctx := t.Context()
	params := map[string]string{"wsrep_sync_wait": "1"}
	first, schema := testdb.Isolated(t, nodes[0], "sqllock_galera", params)
	dbs := make([]*sql.DB, len(nodes))
	for i, node := range nodes {
		dbs[i] = testdb.Open(t, node, withDatabase(t, node.DSN, first.DSN))
	}
	// CREATE DATABASE reaches the other nodes in a moment: a read that
	// waits for what the cluster committed sees it there.
	for _, node := range nodes {
		var n int
		err := testdb.SyncedDB(t, node).QueryRowContext(ctx,
			`SELECT count(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?`, schema).Scan(&n)
		if err != nil || n != 1 {
			t.Fatalf("database %s on %s: %d, %v", schema, node.Name, n, err)
		}
	}
	ran := make([]bool, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range nodes {
		wg.Go(func() {
			<-start
			ran[i], errs[i] = migrations.UpRan(ctx, dbs[i])
		})
	}
	close(start)
	wg.Wait()
	migrated := 0
	for i, node := range nodes {
		if errs[i] != nil {
			t.Errorf("Up on %s: %v", node.Name, errs[i])
		}
		if ran[i] {
			migrated++
		}
	}
	if migrated != 1 {
		t.Errorf("%d of the concurrent Up calls ran migrations (%v), want exactly 1", migrated, ran)
	}
	for i, node := range nodes {
		v, dirty, err := migrations.Version(ctx, dbs[i])
		if err != nil || dirty || v != migrations.Latest {
			t.Errorf("Version on %s = %d, dirty %v, %v; want %d, clean", node.Name, v, dirty, err, migrations.Latest)
		}
		var leases int
		if err := dbs[i].QueryRowContext(ctx, `SELECT count(*) FROM `+migrations.LeaseTable).Scan(&leases); err != nil || leases != 0 {
			t.Errorf("%s on %s: %d rows, %v; want none: the lease is released", migrations.LeaseTable, node.Name, leases, err)
		}
	}
}
