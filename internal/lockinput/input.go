package lockinput

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/host"
)

// ResolveOptions applies opts over the defaults and validates the result.
// Errors are *dblock.OptionError, wrapping dblock.ErrInvalidOption.
func ResolveOptions(opts ...dblock.Option) (dblock.Options, error) {
	o := dblock.Options{TTL: dblock.DefaultTTL}
	for _, opt := range opts {
		if opt == nil {
			return dblock.Options{}, &dblock.OptionError{Option: "Option", Reason: "nil option"}
		}
		opt(&o)
	}
	switch {
	case o.TTL < dblock.MinTTL:
		return dblock.Options{}, &dblock.OptionError{Option: "TTL", Reason: "must be at least " + dblock.MinTTL.String() + ", got " + o.TTL.String()}
	case o.MinHold < 0:
		return dblock.Options{}, &dblock.OptionError{Option: "MinHold", Reason: "must not be negative, got " + o.MinHold.String()}
	case len(o.Note) > dblock.MaxNoteLength:
		return dblock.Options{}, &dblock.OptionError{Option: "Note", Reason: "longer than MaxNoteLength bytes"}
	case !utf8.ValidString(o.Note):
		return dblock.Options{}, &dblock.OptionError{Option: "Note", Reason: "not valid UTF-8"}
	case strings.IndexByte(o.Note, 0) >= 0:
		// PostgreSQL text cannot hold NUL; MySQL would store it: refuse it
		// on both so they behave alike.
		return dblock.Options{}, &dblock.OptionError{Option: "Note", Reason: "contains a NUL byte"}
	}
	return o, nil
}

// ValidateName checks a lock name: not empty, at most dblock.MaxNameLength
// bytes, valid UTF-8 without NUL bytes. Errors are *dblock.NameError,
// wrapping dblock.ErrInvalidName.
func ValidateName(name string) error {
	switch {
	case name == "":
		return &dblock.NameError{Name: name, Reason: "empty"}
	case len(name) > dblock.MaxNameLength:
		return &dblock.NameError{Name: name, Reason: fmt.Sprintf("longer than %d bytes", dblock.MaxNameLength)}
	case !utf8.ValidString(name):
		return &dblock.NameError{Name: name, Reason: "not valid UTF-8"}
	case strings.IndexByte(name, 0) >= 0:
		return &dblock.NameError{Name: name, Reason: "contains a NUL byte"}
	}
	return nil
}

// KindSeparator is U+241F SYMBOL FOR UNIT SEPARATOR (␟), which the lock
// kinds of rowlock and forupdate (semaphores, read/write locks) put between
// a name and the suffix of the rows they derive from it ("api␟s0", slot 0
// of semaphore "api").
const KindSeparator = "\u241f"

// ValidateCallerName is ValidateName for a name a caller gives: it must
// not contain KindSeparator either, or it could name a row that a lock
// kind derives from another name (a plain lock "cfg␟w" would hold the
// write lock of "cfg"). Names a lock kind derives are checked with
// ValidateName.
func ValidateCallerName(name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if strings.Contains(name, KindSeparator) {
		return &dblock.NameError{Name: name, Reason: "contains U+241F (" + KindSeparator + "), which lock kinds use to name their rows"}
	}
	return nil
}

// CheckContext returns an *dblock.OptionError for a nil context, which
// database/sql would otherwise panic on (and, inside its pool, leave the pool
// stuck).
func CheckContext(ctx context.Context) error {
	if ctx == nil {
		return &dblock.OptionError{Option: "ctx", Reason: "nil context"}
	}
	return nil
}

// ProcessHost is the Host of owners created in this process.
func ProcessHost() string { return host.Process() }

// NewOwner returns a fresh owner of this process with 128 random bits as id.
func NewOwner() dblock.Owner {
	var b [16]byte
	// crypto/rand.Read never fails on supported platforms (Go 1.24+).
	_, _ = rand.Read(b[:])
	return dblock.Owner{Host: host.Process(), ID: hex.EncodeToString(b[:])}
}

// OwnerFor returns the owner an acquisition with ctx is made for: the one
// ctx carries, its id validated, or a fresh one. Its host needs no check:
// dblock.WithOwner, the only way to put an owner in a context, sets it to
// this process's.
func OwnerFor(ctx context.Context) (dblock.Owner, error) {
	o, ok := dblock.OwnerFromContext(ctx)
	if !ok {
		return NewOwner(), nil
	}
	if o.ID == "" || len(o.ID) > dblock.MaxOwnerIDLength || !utf8.ValidString(o.ID) || strings.IndexByte(o.ID, 0) >= 0 {
		return dblock.Owner{}, &dblock.OptionError{Option: "owner id", Reason: fmt.Sprintf("must be 1 to %d bytes of UTF-8 without NUL", dblock.MaxOwnerIDLength)}
	}
	return o, nil
}

// CheckLimit checks a semaphore's limit against the package's maximum.
func CheckLimit(limit, maximum int) error {
	if limit < 1 || limit > maximum {
		return &dblock.OptionError{Option: "limit", Reason: fmt.Sprintf("must be 1 to %d, got %d", maximum, limit)}
	}
	return nil
}
