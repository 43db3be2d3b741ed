package galera_test

import (
	"fmt"
	"sync"
)

// board checks, within the test process, what the locks promise while they
// are believed held: at most one live exclusive holder of a resource (a
// name, a semaphore's slot, a read/write lock), no live reader beside a
// live writer, and tokens that grow. A holder is live while its Err is
// nil: a holder that lost its lease (a paused node, a lapsed lease) does
// not count once it knows, which is what rowlock promises (Done and Err
// before the lease could lapse by the database clock).
type board struct {
	mu      sync.Mutex
	holders map[string][]*entry
	// lastExclusive is the token of the latest exclusive holder of each
	// resource; a reader's token is at least it, a writer's above it.
	lastExclusive map[string]int64
	violations    []string
}

type entry struct {
	who    string
	token  int64
	shared bool
	alive  func() bool
}

func newBoard() *board {
	return &board{holders: map[string][]*entry{}, lastExclusive: map[string]int64{}}
}

// enter records e as a holder of resource, and any promise it breaks.
func (b *board) enter(resource string, e *entry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range b.holders[resource] {
		if (!e.shared || !h.shared) && h.alive() {
			b.violations = append(b.violations, fmt.Sprintf("overlap on %s: %s (token %d, shared %t) entered while %s (token %d, shared %t) still held it live",
				resource, e.who, e.token, e.shared, h.who, h.token, h.shared))
		}
	}
	last, seen := b.lastExclusive[resource]
	switch {
	case !e.shared && seen && e.token <= last:
		b.violations = append(b.violations, fmt.Sprintf("token backwards on %s: %s took token %d after token %d", resource, e.who, e.token, last))
	case e.shared && seen && e.token < last:
		b.violations = append(b.violations, fmt.Sprintf("token backwards on %s: reader %s has token %d below writer token %d", resource, e.who, e.token, last))
	}
	if !e.shared {
		b.lastExclusive[resource] = e.token
	}
	b.holders[resource] = append(b.holders[resource], e)
}

// leave removes e from resource's holders.
func (b *board) leave(resource string, e *entry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	hs := b.holders[resource]
	for i, h := range hs {
		if h == e {
			b.holders[resource] = append(hs[:i:i], hs[i+1:]...)
			return
		}
	}
	b.violations = append(b.violations, fmt.Sprintf("%s left %s, which it did not hold", e.who, resource))
}

func (b *board) broken() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.violations...)
}
