package dblock

import (
	"context"

	"github.com/sqllock/sqllock/internal/host"
)

// MaxOwnerIDLength is the longest owner id accepted by WithOwner, in bytes.
const MaxOwnerIDLength = 64

// Owner identifies who holds a lock. Two acquisitions by the same Owner of
// the same name are one hold (reentrancy).
type Owner struct {
	// Host is the host name and process id of the holder, for people reading
	// the lock table ("web-3:4711").
	Host string
	// ID tells owners apart: 128 random bits in hex unless set with WithOwner.
	ID string
}

type ownerKey struct{}

// WithOwner returns a context that acquires locks as the owner with the given
// id and this process's host. Use it to make several goroutines, or several
// acquisitions that do not share a Lock.Context, one owner. An invalid id
// (empty, over MaxOwnerIDLength bytes, not UTF-8, with NUL) is reported by
// the next Acquire as ErrInvalidOption; nothing is locked.
func WithOwner(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ownerKey{}, Owner{Host: host.Process(), ID: id})
}

// OwnerFromContext returns the owner carried by ctx, if any: the one set by
// WithOwner, or the holder's own in a Lock's Context.
func OwnerFromContext(ctx context.Context) (Owner, bool) {
	o, ok := ctx.Value(ownerKey{}).(Owner)
	return o, ok
}
