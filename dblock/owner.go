package dblock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"
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

// processHost is computed once: host name and pid do not change while the
// process runs.
var processHost = func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	h := fmt.Sprintf("%s:%d", host, os.Getpid())
	if len(h) > 255 {
		h = h[len(h)-255:]
	}
	return h
}()

// ProcessHost is the Host of owners created in this process.
func ProcessHost() string { return processHost }

// NewOwner returns a fresh owner of this process with 128 random bits as id.
func NewOwner() Owner {
	var b [16]byte
	// crypto/rand.Read never fails on supported platforms (Go 1.24+).
	_, _ = rand.Read(b[:])
	return Owner{Host: processHost, ID: hex.EncodeToString(b[:])}
}

// WithOwner returns a context that acquires locks as the owner with the given
// id and this process's host. Use it to make several goroutines, or several
// acquisitions that do not share a Lock.Context, one owner. An invalid id
// (empty, over MaxOwnerIDLength bytes, not UTF-8, with NUL) is reported by the next
// Acquire as ErrInvalidOption; nothing is locked.
func WithOwner(ctx context.Context, id string) context.Context {
	return ContextWithOwner(ctx, Owner{Host: processHost, ID: id})
}

// ContextWithOwner returns a context carrying owner.
func ContextWithOwner(ctx context.Context, owner Owner) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFromContext returns the owner carried by ctx, if any.
func OwnerFromContext(ctx context.Context) (Owner, bool) {
	o, ok := ctx.Value(ownerKey{}).(Owner)
	return o, ok
}

// OwnerFor returns the owner an acquisition with ctx is made for: the one
// ctx carries, validated, or a fresh one.
func OwnerFor(ctx context.Context) (Owner, error) {
	o, ok := OwnerFromContext(ctx)
	if !ok {
		return NewOwner(), nil
	}
	switch {
	case o.ID == "" || len(o.ID) > MaxOwnerIDLength || !utf8.ValidString(o.ID) || strings.IndexByte(o.ID, 0) >= 0:
		return Owner{}, &OptionError{Option: "owner id", Reason: fmt.Sprintf("must be 1 to %d bytes of UTF-8 without NUL", MaxOwnerIDLength)}
	case o.Host == "" || len(o.Host) > 255 || !utf8.ValidString(o.Host) || strings.IndexByte(o.Host, 0) >= 0:
		return Owner{}, &OptionError{Option: "owner host", Reason: "must be 1 to 255 bytes of UTF-8 without NUL"}
	}
	return o, nil
}
