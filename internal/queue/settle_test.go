package queue

import (
	"context"
	"testing"
	"time"
)

// TestSettling: the settling context outlives its parent by settleTimeout
// at most, and never ends while the parent lives, however long that is
// (an enqueue retried through contention for longer than settleTimeout
// once failed, its caller still waiting).
func TestSettling(t *testing.T) {
	parent, cancelParent := context.WithCancel(t.Context())
	defer cancelParent()
	sctx, cancel := settling(parent)
	defer cancel()
	time.Sleep(settleTimeout + time.Second)
	if err := sctx.Err(); err != nil {
		t.Fatalf("settling ended while its parent lived: %v", err)
	}
	cancelParent()
	if err := sctx.Err(); err != nil {
		t.Fatalf("settling ended with its parent: %v", err)
	}
	select {
	case <-sctx.Done():
	case <-time.After(10 * settleTimeout): // liveness bound
		t.Fatal("settling did not end after its parent did")
	}
}
