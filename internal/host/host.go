// Package host names this process for the owner column of lock rows. It is
// a leaf package so that both the contract (dblock) and the implementers'
// toolkit (internal/lockkit) can use it without importing each other.
package host

import (
	"fmt"
	"os"
)

// maxLength is the width of the owner_host columns.
const maxLength = 255

// process is computed once: host name and pid do not change while the
// process runs.
var process = func() string {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "unknown"
	}
	h := fmt.Sprintf("%s:%d", name, os.Getpid())
	if len(h) > maxLength {
		// Keep the end: the pid tells processes on one host apart.
		h = h[len(h)-maxLength:]
	}
	return h
}()

// Process is the host name and process id of this process ("web-3:4711"),
// at most 255 bytes.
func Process() string { return process }
