package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

// DefaultGaleraDSNs are the nodes of the MariaDB Galera cluster that
// `.ci/galera start` runs on loopback, comma-separated, node 1 first.
const DefaultGaleraDSNs = "root@tcp(127.0.0.1:3311)/test,root@tcp(127.0.0.1:3312)/test,root@tcp(127.0.0.1:3313)/test"

// galeraEnv overrides DefaultGaleraDSNs.
const galeraEnv = "SQLLOCK_GALERA_DSNS"

// galeraHowTo ends every message that says the cluster cannot be used.
const galeraHowTo = "run `.ci/galera start` (as root: 3 MariaDB Galera nodes on 127.0.0.1:3311-3313; " +
	"`.ci/galera status` tells their state), or set " + galeraEnv + " to the DSNs of the nodes of another cluster, comma-separated"

// galeraWait bounds the waits for the cluster's membership to change. A
// node cut off is noticed after evs.suspect_timeout (5 s by default); a
// rejoin takes a few seconds more. A minute leaves room for a loaded
// machine and still fails a hang.
const galeraWait = time.Minute

// galeraPoll is how often the waits ask the nodes for their state.
const galeraPoll = 200 * time.Millisecond

// Galera returns one Target per node of a MariaDB Galera cluster
// (SQLLOCK_GALERA_DSNS, default DefaultGaleraDSNs, which `.ci/galera start`
// runs), named "galera1", "galera2", ... in the order of the DSNs. Every
// node takes writes. Each Target's DB is a pool of the test's own, closed
// when the test ends, with the DSN as given (no wsrep_sync_wait: a read on
// one node may not see a commit made on another yet; add the parameter
// where a test needs it).
//
// The DBs are not migrated: sqllock's migrations on a cluster are part of
// what the cluster tests test.
//
// One test at a time has the cluster, across the test binaries that `go
// test ./...` runs at once: a test that kills or cuts off a node would
// break another's. Galera waits (bounded) for a file lock, released when
// the test ends; call it once per test.
//
// Before returning, it waits (bounded) until every node is Synced, ready
// and in a Primary component as large as the number of DSNs, so that a
// previous test's rejoin may still be settling. It fails the test, never
// skips, when a node cannot be reached or the cluster does not come whole,
// and says how to start it.
//
// A run that leaves mysql out (SQLLOCK_TEST_DIALECTS) leaves the cluster
// out too: a Galera test returns at once when LeftOut(t, "mysql") says so,
// before it calls Galera, which fails the test otherwise.
func Galera(t testing.TB) []Target {
	t.Helper()
	if chosen, err := chosenDialects(); err != nil || !chosen["mysql"] {
		t.Fatalf("testdb: Galera on a run that leaves mysql out (%s=%s): return when LeftOut(t, \"mysql\") says so",
			dialectsEnv, os.Getenv(dialectsEnv))
	}
	lockGalera(t)
	targets := openGalera(t)
	if err := waitGalera(t.Context(), targets, synced(len(targets))); err != nil {
		t.Fatalf("testdb: Galera cluster not whole: %v\n\tto fix: %s", err, galeraHowTo)
	}
	return targets
}

// openGalera connects to every node, with pools closed when the test ends,
// and checks that each is a Galera node; it does not wait for them to be
// synced.
func openGalera(t testing.TB) []Target {
	t.Helper()
	dsns, err := galeraDSNs()
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	targets := make([]Target, len(dsns))
	for i, dsn := range dsns {
		tg := Target{Name: "galera" + strconv.Itoa(i+1), Dialect: dblock.MySQL, DriverName: "mysql", DSN: dsn}
		if _, err := tg.hostPort(); err != nil {
			t.Fatalf("testdb: %s: node %d, %q: %v", galeraEnv, i+1, dsn, err)
		}
		tg.DB = Open(t, tg, dsn)
		tg.DB.SetMaxOpenConns(sharedMaxConns)
		tg.DB.SetMaxIdleConns(sharedMaxConns)
		ctx, cancel := context.WithTimeout(t.Context(), pingTimeout)
		err := tg.DB.PingContext(ctx)
		cancel()
		if err != nil {
			t.Fatalf("testdb: Galera node %s unreachable at %s: %v\n\tto fix: %s", tg.Name, tg.HostPort(), err, galeraHowTo)
		}
		// A server that is no Galera node never becomes one: say so now
		// rather than after waiting for it to join.
		var wsrepOn bool
		if err := tg.DB.QueryRowContext(t.Context(), `SELECT @@wsrep_on`).Scan(&wsrepOn); err != nil || !wsrepOn {
			t.Fatalf("testdb: %s at %s is not a Galera node (wsrep_on: %v, %v)\n\tto fix: %s", tg.Name, tg.HostPort(), wsrepOn, err, galeraHowTo)
		}
		targets[i] = tg
	}
	return targets
}

// galeraDSNs reads galeraEnv. Fewer than 3 nodes is refused: with 2, a
// node cut off leaves no Primary component, and the cluster tests need a
// majority that keeps working.
func galeraDSNs() ([]string, error) {
	v := strings.TrimSpace(os.Getenv(galeraEnv))
	if v == "" {
		v = DefaultGaleraDSNs
	}
	var dsns []string
	for dsn := range strings.SplitSeq(v, ",") {
		if dsn = strings.TrimSpace(dsn); dsn != "" {
			dsns = append(dsns, dsn)
		}
	}
	if len(dsns) < 3 {
		return nil, fmt.Errorf("%s=%q: %d node(s), want 3 or more, comma-separated", galeraEnv, v, len(dsns))
	}
	return dsns, nil
}

// IsolateNode cuts tg's node off from the rest of its cluster
// (gmcast.isolate=1) and waits (bounded) until the membership change is
// over: the node says it is outside the Primary component (it answers
// queries on tables with error 1047), and the other nodes are synced in a
// Primary component without it. Meanwhile commits freeze on every node,
// for about evs.suspect_timeout (5 s). tg may reach its node through a
// Proxy: nodes are told apart by wsrep_gcomm_uuid. The node rejoins with
// RejoinNode, or when the test ends.
func IsolateNode(t testing.TB, tg Target) {
	t.Helper()
	others := otherNodes(t, tg)
	setIsolate(t, tg, 1)
	t.Cleanup(func() {
		// The test may have rejoined it already; isolate=0 twice is harmless.
		ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
		defer cancel()
		if _, err := tg.DB.ExecContext(ctx, `SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'`); err != nil {
			t.Errorf("testdb: rejoining Galera node %s after the test: %v", tg.Name, err)
		}
	})
	err := waitGalera(t.Context(), []Target{tg}, func(s galeraState) error {
		if s.status == "Primary" {
			return fmt.Errorf("still in the Primary component (%s)", s)
		}
		return nil
	})
	if err == nil {
		err = waitGalera(t.Context(), others, synced(len(others)))
	}
	if err != nil {
		t.Fatalf("testdb: isolating Galera node %s: %v", tg.Name, err)
	}
}

// RejoinNode lets tg's node, cut off by IsolateNode, back into its cluster
// (gmcast.isolate=0) and waits (bounded) until every node is synced in a
// Primary component of all of them: the node has caught up with what was
// committed without it.
func RejoinNode(t testing.TB, tg Target) {
	t.Helper()
	setIsolate(t, tg, 0)
	nodes := openGalera(t)
	if err := waitGalera(t.Context(), nodes, synced(len(nodes))); err != nil {
		t.Fatalf("testdb: rejoining Galera node %s: %v", tg.Name, err)
	}
}

// WaitSynced waits (bounded) until every node of targets is Synced, ready
// and in a Primary component of all the cluster's nodes (as many as
// Galera returns): after a rejoin, a restart or a membership change a
// test caused. It fails the test when that does not happen in time.
func WaitSynced(t testing.TB, targets []Target) {
	t.Helper()
	n, err := galeraDSNs()
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	if err := waitGalera(t.Context(), targets, synced(len(n))); err != nil {
		t.Fatalf("testdb: waiting for the Galera nodes to be synced: %v", err)
	}
}

// otherNodes returns the cluster's nodes other than tg's, with pools of
// their own.
func otherNodes(t testing.TB, tg Target) []Target {
	t.Helper()
	self := gcommUUID(t, tg)
	nodes := openGalera(t)
	var others []Target
	for _, n := range nodes {
		if gcommUUID(t, n) != self {
			others = append(others, n)
		}
	}
	if len(others) != len(nodes)-1 {
		t.Fatalf("testdb: %s (%s) is not one of the Galera nodes of %s (default %s)", tg.Name, tg.HostPort(), galeraEnv, DefaultGaleraDSNs)
	}
	return others
}

// gcommUUID is the node's identity in its cluster.
func gcommUUID(t testing.TB, tg Target) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), pingTimeout)
	defer cancel()
	var id string
	err := tg.DB.QueryRowContext(ctx, `SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
		WHERE VARIABLE_NAME = 'wsrep_gcomm_uuid'`).Scan(&id)
	if err != nil || id == "" {
		t.Fatalf("testdb: wsrep_gcomm_uuid of Galera node %s: %q, %v", tg.Name, id, err)
	}
	return id
}

func setIsolate(t testing.TB, tg Target, isolate int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), pingTimeout)
	defer cancel()
	// A constant statement: isolate is 0 or 1, never user input.
	stmt := `SET GLOBAL wsrep_provider_options = 'gmcast.isolate=` + strconv.Itoa(isolate) + `'`
	if _, err := tg.DB.ExecContext(ctx, stmt); err != nil {
		t.Fatalf("testdb: %s on Galera node %s: %v", stmt, tg.Name, err)
	}
}

// galeraState is what a node says of itself and its cluster.
type galeraState struct {
	size   int    // wsrep_cluster_size: members of the component it is in
	status string // wsrep_cluster_status: Primary, non-Primary or Disconnected
	state  string // wsrep_local_state_comment: Synced, Joining, Donor/Desynced, ...
	ready  bool   // wsrep_ready: it takes queries
}

func (s galeraState) String() string {
	return fmt.Sprintf("cluster_size=%d cluster_status=%s local_state=%s ready=%t", s.size, s.status, s.state, s.ready)
}

// synced accepts a node that is Synced and ready in a Primary component of
// size members.
func synced(size int) func(galeraState) error {
	return func(s galeraState) error {
		if s.size != size || s.status != "Primary" || s.state != "Synced" || !s.ready {
			return fmt.Errorf("%s, want cluster_size=%d cluster_status=Primary local_state=Synced ready=true", s, size)
		}
		return nil
	}
}

// waitGalera polls every node of targets until ok accepts its state, for
// at most galeraWait. The error names the first node that was not
// accepted, and why.
func waitGalera(ctx context.Context, targets []Target, ok func(galeraState) error) error {
	ctx, cancel := context.WithTimeout(ctx, galeraWait)
	defer cancel()
	tick := time.NewTicker(galeraPoll)
	defer tick.Stop()
	for {
		var lastErr error
		for _, tg := range targets {
			s, err := nodeState(ctx, tg.DB)
			if err == nil {
				err = ok(s)
			}
			if err != nil {
				lastErr = fmt.Errorf("node %s (%s): %w", tg.Name, tg.HostPort(), err)
				break
			}
		}
		if lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %v: %w", galeraWait, lastErr)
		case <-tick.C:
		}
	}
}

// nodeState asks a node for its wsrep status. The status variables answer
// on a node outside the Primary component too, where tables do not.
func nodeState(ctx context.Context, db *sql.DB) (galeraState, error) {
	// A node a test paused (SIGSTOP) must not hold the wait past its bound.
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
		WHERE VARIABLE_NAME IN ('wsrep_cluster_size', 'wsrep_cluster_status', 'wsrep_local_state_comment', 'wsrep_ready')`)
	if err != nil {
		return galeraState{}, err
	}
	defer rows.Close()
	var s galeraState
	seen := 0
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return galeraState{}, err
		}
		seen++
		switch strings.ToLower(name) {
		case "wsrep_cluster_size":
			s.size, _ = strconv.Atoi(value)
		case "wsrep_cluster_status":
			s.status = value
		case "wsrep_local_state_comment":
			s.state = value
		case "wsrep_ready":
			s.ready = value == "ON"
		}
	}
	if err := rows.Err(); err != nil {
		return galeraState{}, err
	}
	if seen < 4 {
		return galeraState{}, fmt.Errorf("no wsrep status variables: not a MariaDB Galera node")
	}
	return s, nil
}
