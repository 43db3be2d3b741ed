// Package tuning lets this module's tests of other packages (leader, the
// torture workers) pace a rowlock Locker's waiters, which rowlock's API
// does not offer: its defaults serve every user.
//
// Package rowlock registers the option in its init; the variable is set
// once, before main, and only read after.
package tuning

import "time"

// pollInterval builds rowlock's option; set by rowlock's init.
var pollInterval func(minimum, maximum time.Duration) any

// Register is called by package rowlock's init, and by nothing else.
func Register(f func(minimum, maximum time.Duration) any) { pollInterval = f }

// PollInterval returns the rowlock.Option that sets the range of pauses
// between a waiter's tries (assert it: tuning.PollInterval(a, b).(rowlock.Option)).
func PollInterval(minimum, maximum time.Duration) any { return pollInterval(minimum, maximum) }
