package rowlock

import (
	"context"

	"github.com/sqllock/sqllock/dblock"
)

// Holder tells who holds name's lock now, by the database clock: its
// owner, fencing token and note; held is false when it is free. It is Held
// in the shape package leader asks of a Locker (leader.HolderTeller), so
// that replicas following a leader.Leader can tell who leads.
// Errors: as Held's.
func (l *Locker) Holder(ctx context.Context, name string) (owner dblock.Owner, token int64, note string, held bool, err error) {
	h, ok, err := l.Held(ctx, name)
	if err != nil || !ok {
		return dblock.Owner{}, 0, "", false, err
	}
	return dblock.Owner{Host: h.OwnerHost, ID: h.OwnerID}, h.Token, h.Note, true, nil
}
