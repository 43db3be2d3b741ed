// Package fixture plants dead references in Go comments for
// TestDeadReferencesFound; it is never built.
package fixture

// Live: dblock.ErrLockLost, (*Locker).Acquire, internal/clock,
// rowlock/doc.go.
//
// Dead: dblock.ErrNoSuchError, (*Locker).NoSuchMethod, internal/nosuchpkg.
var x int
