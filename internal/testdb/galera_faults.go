package testdb

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SyncedDB returns a pool of tg's node (closed when the test ends) whose
// reads first wait for what the other nodes committed
// (wsrep_sync_wait=1): a test's checks read through it.
func SyncedDB(t testing.TB, tg Target) *sql.DB {
	t.Helper()
	return Open(t, tg, withParam(t, tg.DSN, "wsrep_sync_wait", "1"))
}

// withParam is dsn with one more parameter.
func withParam(t testing.TB, dsn, key, value string) string {
	t.Helper()
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + key + "=" + value
}

// GaleraNode is one node of the cluster that `.ci/galera` runs, with the
// pid of its server, read while it answered: a test can kill or pause it.
type GaleraNode struct {
	Target
	// Number is the node's number in .ci/galera (its wsrep_node_name is
	// "node<Number>").
	Number int
	pid    int
}

// Node returns tg's node, which must be one that `.ci/galera` runs on this
// machine (a server started by this user, whose pid file is readable).
func Node(t testing.TB, tg Target) *GaleraNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), pingTimeout)
	defer cancel()
	var name, pidFile string
	if err := tg.DB.QueryRowContext(ctx, `SELECT @@wsrep_node_name, @@pid_file`).Scan(&name, &pidFile); err != nil {
		t.Fatalf("testdb: Galera node %s: %v", tg.Name, err)
	}
	n, err := strconv.Atoi(strings.TrimPrefix(name, "node"))
	if err != nil || !strings.HasPrefix(name, "node") {
		t.Fatalf("testdb: Galera node %s is named %q, not node<N>: not a node of .ci/galera", tg.Name, name)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("testdb: Galera node %s: its pid file: %v (the faults need the node on this machine)", tg.Name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Fatalf("testdb: Galera node %s: pid file %s holds %q", tg.Name, pidFile, b)
	}
	return &GaleraNode{Target: tg, Number: n, pid: pid}
}

// Kill SIGKILLs the node's server and waits (bounded) until it is gone and
// the other nodes are synced in a Primary component without it. Commits
// freeze on every node meanwhile, for about evs.suspect_timeout (5 s).
// Restart brings it back; when the test ends, it is restarted if needed.
func (n *GaleraNode) Kill(t testing.TB) {
	t.Helper()
	others := otherNodes(t, n.Target)
	t.Cleanup(func() {
		if err := syscall.Kill(n.pid, 0); err != nil {
			n.start(t)
		}
	})
	if err := syscall.Kill(n.pid, syscall.SIGKILL); err != nil {
		t.Fatalf("testdb: SIGKILL Galera node %s (pid %d): %v", n.Name, n.pid, err)
	}
	deadline := time.Now().Add(galeraWait)
	for syscall.Kill(n.pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("testdb: Galera node %s (pid %d) still runs %v after SIGKILL", n.Name, n.pid, galeraWait)
		}
		time.Sleep(galeraPoll)
	}
	if err := waitGalera(t.Context(), others, synced(len(others))); err != nil {
		t.Fatalf("testdb: after killing Galera node %s: %v", n.Name, err)
	}
}

// Restart starts the node's server again (`.ci/galera start-node`), and
// waits (bounded) until every node is synced in a Primary component of
// all of them: it has caught up with what was committed without it.
func (n *GaleraNode) Restart(t testing.TB) {
	t.Helper()
	n.start(t)
	nodes := openGalera(t)
	if err := waitGalera(t.Context(), nodes, synced(len(nodes))); err != nil {
		t.Fatalf("testdb: restarting Galera node %s: %v", n.Name, err)
	}
	fresh := Node(t, n.Target)
	n.pid = fresh.pid
}

func (n *GaleraNode) start(t testing.TB) {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testdb: cannot locate .ci/galera")
	}
	script := filepath.Join(filepath.Dir(file), "..", "..", ".ci", "galera")
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 2*galeraWait)
	defer cancel()
	out, err := exec.CommandContext(ctx, script, "start-node", strconv.Itoa(n.Number)).CombinedOutput()
	if err != nil {
		t.Fatalf("testdb: %s start-node %d: %v\n%s", script, n.Number, err, out)
	}
}

// Pause SIGSTOPs the node's server, and waits (bounded) until the other
// nodes are synced in a Primary component without it: it keeps its
// connections and answers nothing. Commits freeze on every node until the
// cluster sees it leave, after evs.suspect_timeout (5 s). Resume, or the
// end of the test, continues it.
//
// The wait matters: right after the signal the other nodes still report
// the old membership, so a Resume that came before they noticed would
// find the cluster whole and return while it is about to split.
func (n *GaleraNode) Pause(t testing.TB) {
	t.Helper()
	others := otherNodes(t, n.Target)
	t.Cleanup(func() { _ = syscall.Kill(n.pid, syscall.SIGCONT) })
	if err := syscall.Kill(n.pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("testdb: SIGSTOP Galera node %s (pid %d): %v", n.Name, n.pid, err)
	}
	if err := waitGalera(t.Context(), others, synced(len(others))); err != nil {
		t.Fatalf("testdb: after pausing Galera node %s: %v", n.Name, err)
	}
}

// Resume SIGCONTs the node paused by Pause and waits (bounded) until every
// node is synced in a Primary component of all of them.
func (n *GaleraNode) Resume(t testing.TB) {
	t.Helper()
	if err := syscall.Kill(n.pid, syscall.SIGCONT); err != nil {
		t.Fatalf("testdb: SIGCONT Galera node %s (pid %d): %v", n.Name, n.pid, err)
	}
	nodes := openGalera(t)
	if err := waitGalera(t.Context(), nodes, synced(len(nodes))); err != nil {
		t.Fatalf("testdb: resuming Galera node %s: %v", n.Name, err)
	}
}
