package leader

import (
	"context"
	"fmt"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
)

// HolderTeller is implemented by Lockers that can tell who holds a lock
// (rowlock's Locker). Leader.Leader and Observe need it. Its results use
// no type of this package, so a Locker implements it without importing
// package leader.
type HolderTeller interface {
	// Holder tells who holds name's lock now, by the clock that decides
	// its lease: the owner, the fencing token (positive) and the note
	// (dblock.Note) it was acquired with. held is false when it is free.
	Holder(ctx context.Context, name string) (owner dblock.Owner, token int64, note string, held bool, err error)
}

// Info is who leads a name.
type Info struct {
	// Name is the name the replicas campaign for.
	Name string
	// Owner is the owner of the leader's lock: its host and process, and
	// an id of its term (a new random one for every term, unless Run's
	// context carries dblock.WithOwner). Compare it with Lock().Owner()
	// to tell whether this Leader is the one.
	Owner dblock.Owner
	// Token is the fencing token of the leader's term: it grows with every
	// new term. It is 0 when no one leads (Observe).
	Token int64
	// Value is what the leader advertises (WithValue).
	Value string
}

// Leader tells who leads now, as the database has it: the owner, term and
// value of the replica holding the lock, whether or not this Leader
// campaigns. It needs no Run: a replica that only follows calls it on a
// Leader it never runs.
//
// Errors: ErrNoLeader (with an Info holding only the Name) when no one
// leads, ErrCannotTell when the Locker cannot tell (it is no
// HolderTeller), dblock.ErrInvalidOption for a nil ctx, or the Locker's
// errors (dblock.ErrSchemaMissing, dblock.ErrClosed, a driver error).
func (ld *Leader) Leader(ctx context.Context) (Info, error) {
	teller, err := ld.teller(ctx, "Leader")
	if err != nil {
		return Info{Name: ld.name}, err
	}
	info, err := ld.current(ctx, teller)
	if err == nil && info.Token == 0 {
		err = fmt.Errorf("%w for %q", ErrNoLeader, ld.name)
	}
	return info, err
}

// teller checks ctx and returns the Locker as a HolderTeller.
func (ld *Leader) teller(ctx context.Context, op string) (HolderTeller, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return nil, fmt.Errorf("leader: %s: %w", op, err)
	}
	t, ok := ld.l.(HolderTeller)
	if !ok {
		return nil, fmt.Errorf("leader: %s: %w: a %T has no Holder method (HolderTeller)", op, ErrCannotTell, ld.l)
	}
	return t, nil
}

// current asks the Locker who holds the name; Token is 0 when no one does.
func (ld *Leader) current(ctx context.Context, t HolderTeller) (Info, error) {
	owner, token, note, held, err := t.Holder(ctx, ld.name)
	if err != nil {
		return Info{Name: ld.name}, fmt.Errorf("leader: who leads %q: %w", ld.name, err)
	}
	if !held {
		return Info{Name: ld.name}, nil
	}
	return Info{Name: ld.name, Owner: owner, Token: token, Value: note}, nil
}
