package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
)

// DefaultResignPause is how long a Leader that resigned waits before it
// campaigns again. It is long enough for replicas waiting for the lock to
// take it: a waiting rowlock Locker polls at most every second when it
// gets no wake-up. It is short enough that a lone replica does not leave
// the name without a leader for long.
const DefaultResignPause = 5 * time.Second

// Term states: a term ends once, either by Resign or on its own.
const (
	termActive int32 = iota
	termResigned
	termOver
)

// Resign gives up the leadership without ending Run: the function's
// context is canceled with the cause ErrResigned, and once the function
// has returned the lock is released and Run waits for the resign pause
// (WithResignPause) before campaigning again. Resign returns once the lock
// is released, or the error of a release that failed (the lock then frees
// itself when its lease lapses).
//
// Called from the leader's function with the function's context (or one
// derived from it), Resign returns at once, since the release waits for the
// function to return. Given another context there, it would wait for
// itself until that context ends.
//
// Errors: ErrNotLeader when this Leader does not lead (or its term is
// already ending), dblock.ErrInvalidOption for a nil ctx, ctx.Err() when
// ctx ends first (the resignation goes on).
func (ld *Leader) Resign(ctx context.Context) error {
	if err := lockinput.CheckContext(ctx); err != nil {
		return fmt.Errorf("leader: Resign: %w", err)
	}
	t := ld.term.Load()
	if t == nil || !t.state.CompareAndSwap(termActive, termResigned) {
		return fmt.Errorf("leader: Resign %q: %w", ld.name, ErrNotLeader)
	}
	t.end(ErrResigned)
	if ctx.Value(termKey{}) == t {
		return nil // from the function: the release waits for it to return
	}
	select {
	case <-t.released:
		return t.releaseErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// termKey marks the function's context with its term, so that Resign
// knows when it is called from the function.
type termKey struct{}

// releaseError is what Resign reports of a release: a lock lost meanwhile
// is not held by anyone in this term, which is what Resign wants.
func releaseError(name string, err error) error {
	if err == nil || errors.Is(err, dblock.ErrLockLost) {
		return nil
	}
	return fmt.Errorf("leader: Resign %q: releasing the lock: %w", name, err)
}
