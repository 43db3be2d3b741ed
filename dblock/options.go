package dblock

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"
)

// Defaults and limits of the acquisition options.
const (
	// DefaultTTL is the lease of a lock acquired without the TTL option. A
	// holder renews it every TTL/3 while it holds the lock, so the TTL bounds
	// how long a crashed holder keeps others waiting.
	DefaultTTL = 30 * time.Second

	// MinTTL is the shortest lease accepted: shorter ones cannot be renewed
	// reliably over a network.
	MinTTL = 100 * time.Millisecond

	// MaxNameLength is the longest lock name, in bytes (the width of the
	// name column).
	MaxNameLength = 255

	// MaxNoteLength is the longest note, in bytes.
	MaxNoteLength = 1024
)

// Option configures one acquisition.
type Option func(*Options)

// Options is the resolved form of a list of Option values. Implementations
// of Locker obtain it with ResolveOptions.
type Options struct {
	// TTL is the lease. Default DefaultTTL.
	TTL time.Duration
	// MinHold keeps the lock held until acquisition time + MinHold even if it
	// is released earlier. Default 0 (release frees it at once).
	MinHold time.Duration
	// Fair makes waiters take the lock in the order they asked for it.
	// Default false.
	Fair bool
	// Note is stored with the lock for people reading the lock table.
	// Default "".
	Note string
}

// TTL sets the lease of the lock; default DefaultTTL, at least MinTTL. The
// lease is renewed automatically every TTL/3 while the lock is held.
func TTL(d time.Duration) Option { return func(o *Options) { o.TTL = d } }

// MinHold keeps the lock held until d after it was acquired, even when it is
// released earlier (ShedLock's lockAtLeastFor): a job that finishes fast is
// not run again by a replica whose scheduler fires a little later. Default 0.
func MinHold(d time.Duration) Option { return func(o *Options) { o.MinHold = d } }

// Fair makes Acquire queue behind earlier waiters instead of racing them.
// Default off. Locks that do not support fairness return ErrInvalidOption.
func Fair() Option { return func(o *Options) { o.Fair = true } }

// Note stores a free-form note (at most MaxNoteLength bytes, UTF-8, no NUL) with
// the lock, shown by `sqllock status`. Default "".
func Note(s string) Option { return func(o *Options) { o.Note = s } }

// ResolveOptions applies opts over the defaults and validates the result.
// Errors wrap ErrInvalidOption.
func ResolveOptions(opts ...Option) (Options, error) {
	o := Options{TTL: DefaultTTL}
	for _, opt := range opts {
		if opt == nil {
			return Options{}, &OptionError{Option: "Option", Reason: "nil option"}
		}
		opt(&o)
	}
	switch {
	case o.TTL < MinTTL:
		return Options{}, &OptionError{Option: "TTL", Reason: "must be at least " + MinTTL.String() + ", got " + o.TTL.String()}
	case o.MinHold < 0:
		return Options{}, &OptionError{Option: "MinHold", Reason: "must not be negative, got " + o.MinHold.String()}
	case len(o.Note) > MaxNoteLength:
		return Options{}, &OptionError{Option: "Note", Reason: "longer than MaxNoteLength bytes"}
	case !utf8.ValidString(o.Note):
		return Options{}, &OptionError{Option: "Note", Reason: "not valid UTF-8"}
	case strings.IndexByte(o.Note, 0) >= 0:
		// PostgreSQL text cannot hold NUL; MySQL would store it: refuse it
		// on both so they behave alike.
		return Options{}, &OptionError{Option: "Note", Reason: "contains a NUL byte"}
	}
	return o, nil
}

// ValidateName checks a lock name: not empty, at most MaxNameLength bytes,
// valid UTF-8 without NUL bytes. Errors are *NameError, wrapping ErrInvalidName.
func ValidateName(name string) error {
	switch {
	case name == "":
		return &NameError{Name: name, Reason: "empty"}
	case len(name) > MaxNameLength:
		return &NameError{Name: name, Reason: "longer than 255 bytes"}
	case !utf8.ValidString(name):
		return &NameError{Name: name, Reason: "not valid UTF-8"}
	}
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			return &NameError{Name: name, Reason: "contains a NUL byte"}
		}
	}
	return nil
}

// CheckContext returns an *OptionError for a nil context, which database/sql
// would otherwise panic on (and, inside its pool, leave the pool stuck).
func CheckContext(ctx context.Context) error {
	if ctx == nil {
		return &OptionError{Option: "ctx", Reason: "nil context"}
	}
	return nil
}
