package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// TestGaleraRunWait: `sqllock run --wait` started at once on two nodes of a
// Galera cluster never runs two commands at once. Each command appends its
// start and its end to one file; the lines must pair up, one command after
// the other. With session markers (GET_LOCK, each node's own) a waiter on
// node 2 took the lock of a live holder on node 1 and ran its command
// while the holder's still ran.
func TestGaleraRunWait(t *testing.T) {
	if testdb.LeftOut(t, "mysql") {
		return
	}
	// Built before the cluster is ours (testdb.Galera): other packages'
	// Galera tests wait for it meanwhile.
	dir := t.TempDir()
	bin := filepath.Join(dir, "sqllock")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	nodes := testdb.Galera(t)
	if err := migrations.Up(t.Context(), nodes[0].DB); err != nil {
		t.Fatalf("migrations.Up: %v", err)
	}
	testdb.WaitSynced(t, nodes)
	record := filepath.Join(dir, "record")
	name := testdb.Name(t)
	// The command's own pid tells its lines apart; the sleep keeps it
	// running while the others wait.
	script := `echo "start $$" >> "$RECORD"; sleep 0.5; echo "end $$" >> "$RECORD"`
	const perNode = 3
	var wg sync.WaitGroup
	for _, node := range nodes[:2] {
		dsn := cliDSN(t, node.DSN)
		for range perNode {
			wg.Go(func() {
				cmd := exec.CommandContext(t.Context(), bin, "run", "--name", name, "--wait", "2m", "--ttl", "3s", "--", "sh", "-c", script)
				cmd.Env = append(os.Environ(), "SQLLOCK_DSN="+dsn, "RECORD="+record)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("sqllock run on %s: %v\n%s", node.Name, err, out)
				}
			})
		}
	}
	wg.Wait()
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2*2*perNode {
		t.Fatalf("%d lines recorded, want %d:\n%s", len(lines), 2*2*perNode, data)
	}
	for i := 0; i+1 < len(lines); i += 2 {
		start, end := lines[i], lines[i+1]
		pid, ok := strings.CutPrefix(start, "start ")
		if !ok || end != "end "+pid {
			t.Fatalf("two commands ran at once: line %d is %q, then %q:\n%s", i+1, start, end, data)
		}
	}
}

// cliDSN is a go-sql-driver DSN as the CLI takes it (mysql://...).
func cliDSN(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("mysql://%s@%s/%s", cfg.User, cfg.Addr, cfg.DBName)
}
