package torture_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stallTick and stallGap: a process whose ticker goroutine went more than
// stallGap without a tick stood still (a SIGSTOP of the run, or no CPU).
const (
	stallTick = 50 * time.Millisecond
	stallGap  = tortureTTL / 2
)

// stallWatch tells whether the process stood still after a given moment.
// A server that ends a transaction idle for a lock's TTL (forupdate's
// idle_in_transaction_session_timeout) is explained only by such a stall
// in the middle of the acquisition: the library itself sends the
// statements of an acquisition one after the other.
type stallWatch struct {
	mu      sync.Mutex
	lastEnd time.Time // when the latest stall ended; monotonic
}

// run ticks until ctx ends.
func (s *stallWatch) run(ctx context.Context) {
	ticker := time.NewTicker(stallTick)
	defer ticker.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		now := time.Now()
		if now.Sub(last) > stallGap {
			s.mu.Lock()
			s.lastEnd = now
			s.mu.Unlock()
		}
		last = now
	}
}

// since reports whether a stall ended after t: the process stood still
// during something that started at t and is over now.
func (s *stallWatch) since(t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastEnd.After(t)
}

// TestStallWatchSeesSIGSTOP: the watch reports a stall once the process
// was SIGSTOPped past stallGap (a child sends the SIGCONT), as the run's
// SIGSTOPs are.
func TestStallWatchSeesSIGSTOP(t *testing.T) {
	var s stallWatch
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { s.run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	started := time.Now()
	time.Sleep(2 * stallTick) // the ticker has ticked
	cont := exec.Command("sh", "-c", fmt.Sprintf("sleep %.3f; kill -CONT %d", (2*stallGap).Seconds(), os.Getpid()))
	if err := cont.Start(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := cont.Wait(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * stallGap)
	for !s.since(started) {
		if time.Now().After(deadline) {
			t.Fatalf("no stall seen after a SIGSTOP of %v", 2*stallGap)
		}
		time.Sleep(stallTick)
	}
}
