// Package clock is the library's one source of wall-clock time, so that
// tests can run a process whose wall clock is off, as a host with a skewed
// clock would, and prove that only the database clock decides who holds a
// lock.
//
// Library code calls Now instead of time.Now (a test in this package fails
// on any other call, except the few it lists with their reasons). Unless
// SQLLOCK_TEST_CLOCK_OFFSET is set, Now is exactly time.Now.
//
// # Why an offset in the process simulates a skewed host faithfully
//
// A Go time.Time from time.Now carries two readings: the wall clock
// (CLOCK_REALTIME, which an administrator, NTP or a wrong RTC can put
// anywhere) and a monotonic reading (CLOCK_MONOTONIC, which only counts
// elapsed time and is the same on every host whatever its wall clock says).
// Sub, Before, After, time.Since, time.Until, timers and context deadlines
// use the monotonic readings when both times have one; formatting, Unix,
// Round(0), UTC and anything sent to a database use the wall clock. So a
// host whose wall clock is off by d hands Go times whose wall clock is off
// by d and whose monotonic readings are not. Now, with an offset, returns
// exactly that: time.Now with d added to the wall clock alone and the
// monotonic reading kept. Every use of the result then behaves as on the
// skewed host: durations and deadlines are unchanged, and any wall-clock
// reading (a client time compared with the database's, a timestamp sent
// to SQL) is off by d.
//
// The alternatives do not skew anything Go code sees. A Linux time
// namespace (unshare --time) shifts only CLOCK_MONOTONIC and
// CLOCK_BOOTTIME, and Go measures its monotonic readings from process
// start, so that offset cancels out; Linux has no per-process
// CLOCK_REALTIME offset; and Go reads the clocks through the vDSO, so
// libfaketime cannot intercept them. time.Now().Add(d) is not faithful
// either: Add moves the monotonic reading by d as well, so a deadline
// built from it and waited on with a timer, time.Until or
// context.WithDeadline would be an hour early or late, which no skewed
// host sees.
//
// What this does not simulate: a wall clock that steps during the run, a
// monotonic clock that runs at a different rate (the library's safety
// margin of a tenth of the TTL is there for that), and wall-clock reads in
// third-party code (drivers, robfig/cron), which call time.Now themselves.
//
// This package is internal: applications cannot import it. The variable is
// for tests; a value that is not a valid Go duration within a year either
// way (time.ParseDuration) is ignored and has no effect.
package clock

import (
	"os"
	"reflect"
	"time"
	"unsafe"
)

// OffsetEnv names the environment variable read once, at process start,
// to set the offset added to the wall clock: a Go duration such as "1h" or
// "-90m". Tests only.
const OffsetEnv = "SQLLOCK_TEST_CLOCK_OFFSET"

// maxOffset bounds the accepted offsets: further than a year off, no host
// runs, and the wall clock could leave the range (1885 to 2157) in which
// a time.Time keeps its monotonic reading.
const maxOffset = 365 * 24 * time.Hour

// offset is set once, before any goroutine of the package's users runs,
// and only read afterwards.
var offset = parseOffset(os.Getenv(OffsetEnv))

// Now is time.Now with the wall clock moved by the offset from
// SQLLOCK_TEST_CLOCK_OFFSET, keeping time.Now's monotonic reading; without
// an offset it is time.Now.
func Now() time.Time {
	now := time.Now()
	if offset == 0 {
		return now
	}
	return shiftWall(now, offset)
}

// Offset is the offset Now adds to the wall clock: zero unless
// SQLLOCK_TEST_CLOCK_OFFSET held a valid one.
func Offset() time.Duration { return offset }

// parseOffset returns the offset v asks for, or zero when v is not a valid
// one, or when this Go's time.Time is not laid out as shiftWall expects.
func parseOffset(v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil || d < -maxOffset || d > maxOffset || !layoutKnown {
		return 0
	}
	return d
}

// timeRepr mirrors the fields of time.Time (unchanged since Go 1.9): wall
// holds the hasMonotonic flag and the wall clock, ext the monotonic
// reading when the flag is set. layoutKnown checks the mirror against the
// real type before shiftWall is ever used.
type timeRepr struct {
	wall uint64
	ext  int64
	loc  *time.Location
}

// hasMonotonic is time.Time's flag, in wall, for "ext is a monotonic
// reading".
const hasMonotonic = 1 << 63

// layoutKnown reports whether time.Time has exactly timeRepr's fields.
var layoutKnown = func() bool {
	actual, mirror := reflect.TypeFor[time.Time](), reflect.TypeFor[timeRepr]()
	if actual.Size() != mirror.Size() || actual.NumField() != mirror.NumField() {
		return false
	}
	for i := range actual.NumField() {
		r, m := actual.Field(i), mirror.Field(i)
		if r.Name != m.Name || r.Type != m.Type || r.Offset != m.Offset {
			return false
		}
	}
	return true
}()

// shiftWall returns t with d added to its wall clock and its monotonic
// reading, if it has one, unchanged. Go offers no way to do this without
// unsafe: Add moves both readings, and Round(0) drops the monotonic one.
func shiftWall(t time.Time, d time.Duration) time.Time {
	shifted := t.Add(d) // moves both readings
	src := (*timeRepr)(unsafe.Pointer(&t))
	dst := (*timeRepr)(unsafe.Pointer(&shifted))
	if src.wall&hasMonotonic != 0 && dst.wall&hasMonotonic != 0 {
		dst.ext = src.ext // the monotonic reading back as it was
	}
	return shifted
}
