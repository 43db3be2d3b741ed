package dblock

import "time"

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

// Options is what a list of Option values sets, over the defaults. Lockers
// read it; users pass Option values.
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
