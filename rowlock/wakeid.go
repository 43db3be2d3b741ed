package rowlock

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/sqllock/sqllock/internal/lockinput"
)

// newWakeID returns a fresh wake identity: what a waiter records in
// wanted_by when it asks for a wake-up, and what a release compares
// wanted_by with. A release wakes its own Locker's waiters in memory; it
// announces itself in the database (NOTIFY, a doorbell) only when a waiter
// with another identity asked. The identity is the Locker's, not the
// process's: a process-wide identity needs a process-wide set of waitlists
// to wake its other Lockers' waiters in memory, and the Lockers of one
// process then share mutable state. With one identity per Locker, another
// Locker of the same process is woken as one in another process is.
//
// It is 16 random hex digits, then the process's host and pid for the
// operator who reads the row, cut to the column's 255 bytes.
func newWakeID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand documents it)
	id := hex.EncodeToString(b[:]) + "/" + lockinput.ProcessHost()
	return id[:min(len(id), 255)]
}
