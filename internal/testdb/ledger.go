package testdb

import (
	"fmt"
	"sync"
)

// Ledger checks, within one test process, what a lock promises: at most
// one holder at a time, and a fencing token larger than every earlier
// holder's. A holder calls Enter once it holds the lock and Leave before
// it releases it. It is safe for concurrent use.
type Ledger struct {
	mu      sync.Mutex
	holder  string // "" while nobody holds
	last    int64
	entries int
}

// Enter records that who holds the lock with token. The error says which
// promise broke.
func (g *Ledger) Enter(who string, token int64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.holder != "" {
		return fmt.Errorf("ledger: %s entered with token %d while %s holds with token %d: two holders", who, token, g.holder, g.last)
	}
	if g.entries > 0 && token <= g.last {
		return fmt.Errorf("ledger: %s entered with token %d after token %d: tokens must grow", who, token, g.last)
	}
	g.holder, g.last = who, token
	g.entries++
	return nil
}

// Leave records that who no longer holds the lock.
func (g *Ledger) Leave(who string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.holder != who {
		return fmt.Errorf("ledger: %s left while the holder is %q", who, g.holder)
	}
	g.holder = ""
	return nil
}

// Entries is the number of holds recorded.
func (g *Ledger) Entries() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.entries
}
