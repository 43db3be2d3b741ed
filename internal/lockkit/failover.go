package lockkit

import (
	"time"

	"github.com/sqllock/sqllock/dblock"
)

// The failover pause P, as rowlock's and forupdate's WithFailoverPause set
// it. The argument that it keeps two holders apart across a PostgreSQL
// failover is in rowlock/failover.go's Failover section.

// FailoverPause is P where it applies: p on PostgreSQL, 0 (none) on the
// other dialects, which have no timelines.
func FailoverPause(d dblock.Dialect, p time.Duration) time.Duration {
	if d != dblock.Postgres {
		return 0
	}
	return p
}

// Belief is how long after its last proof (a take, a renewal, a ping) a
// hold with this ttl trusts its lock, P being pause: the ttl, or P when
// the pause is on and shorter.
func Belief(ttl, pause time.Duration) time.Duration {
	if pause > 0 && pause < ttl {
		return pause
	}
	return ttl
}

// ValidFailoverPause reports whether p is a valid WithFailoverPause: 0
// (off) or at least dblock.MinTTL.
func ValidFailoverPause(p time.Duration) bool { return p == 0 || p >= dblock.MinTTL }

// FailoverPauseError is the error of a WithFailoverPause that is not valid.
func FailoverPauseError() error {
	return &dblock.OptionError{Option: "WithFailoverPause", Reason: "must be 0 (off) or at least dblock.MinTTL"}
}
