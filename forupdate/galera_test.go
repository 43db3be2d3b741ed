package forupdate_test

import (
	"errors"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// TestGaleraRefused: on a node of a Galera cluster every kind refuses to
// lock with ErrMultiPrimary (row locks are per node: two nodes granted one
// name at once), unless the Locker is told that all its locks go to one
// node (WithSingleNode), where it locks as on one server.
func TestGaleraRefused(t *testing.T) {
	if testdb.LeftOut(t, "mysql") {
		return
	}
	nodes := testdb.Galera(t)
	ctx := t.Context()
	if err := migrations.Up(ctx, nodes[0].DB); err != nil {
		t.Fatalf("migrations.Up on a Galera node: %v", err)
	}
	testdb.WaitSynced(t, nodes)
	l, err := forupdate.New(nodes[1].DB)
	if err != nil {
		t.Fatal(err)
	}
	sem, err := l.Semaphore(2)
	if err != nil {
		t.Fatal(err)
	}
	name := testdb.Name(t)
	for _, c := range []struct {
		kind string
		l    dblock.Locker
	}{{"lock", l}, {"semaphore", sem}, {"readers", l.Readers()}, {"writers", l.Writers()}} {
		if _, err := c.l.TryAcquire(ctx, name); !errors.Is(err, forupdate.ErrMultiPrimary) || !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s TryAcquire on a Galera node = %v, want ErrMultiPrimary", c.kind, err)
		}
		if _, err := c.l.Acquire(ctx, name); !errors.Is(err, forupdate.ErrMultiPrimary) {
			t.Errorf("%s Acquire on a Galera node = %v, want ErrMultiPrimary", c.kind, err)
		}
	}
	one, err := forupdate.New(nodes[1].DB, forupdate.WithSingleNode())
	if err != nil {
		t.Fatal(err)
	}
	k, err := one.TryAcquire(ctx, name)
	if err != nil {
		t.Fatalf("TryAcquire WithSingleNode: %v", err)
	}
	if _, err := one.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
		t.Errorf("a second TryAcquire on the same node = %v, want ErrNotAcquired", err)
	}
	if err := k.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
