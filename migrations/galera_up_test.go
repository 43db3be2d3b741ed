package migrations_test

import (
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
