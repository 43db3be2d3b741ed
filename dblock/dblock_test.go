package dblock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

func TestMain(m *testing.M) {
	// Do starts no goroutines; the locks it takes stop theirs on Release.
	testdb.Main(m)
}

func TestDoBadInput(t *testing.T) {
	ok := func(context.Context) error { return nil }
	if err := dblock.Do(t.Context(), nil, "x", ok); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("nil locker: %v", err)
	}
}

func TestOwnerFromContext(t *testing.T) {
	if o, ok := dblock.OwnerFromContext(t.Context()); ok {
		t.Fatalf("a bare context carries owner %+v", o)
	}
	o, ok := dblock.OwnerFromContext(dblock.WithOwner(t.Context(), "worker-1"))
	if !ok || o.ID != "worker-1" || o.Host == "" {
		t.Fatalf("WithOwner(worker-1) carries %+v, %v", o, ok)
	}
}
