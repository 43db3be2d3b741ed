package rowlock

import (
	"context"
	"fmt"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
)

// Holder tells who holds name's lock now, by the database clock: its
// owner, fencing token and note; held is false when it is free. It is the
// shape package leader asks of a Locker (leader.HolderTeller), so that
// replicas following a leader.Leader can tell who leads.
// Errors: dblock.ErrInvalidName, dblock.ErrSchemaMissing, or a driver error.
func (l *Locker) Holder(ctx context.Context, name string) (owner dblock.Owner, token int64, note string, held bool, err error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return dblock.Owner{}, 0, "", false, fmt.Errorf("rowlock: Holder: %w", err)
	}
	if err := lockinput.ValidateCallerName(name); err != nil {
		return dblock.Owner{}, 0, "", false, err
	}
	h, ok, err := l.held(ctx, name)
	if err != nil || !ok {
		return dblock.Owner{}, 0, "", false, err
	}
	return dblock.Owner{Host: h.OwnerHost, ID: h.OwnerID}, h.Token, h.Note, true, nil
}
