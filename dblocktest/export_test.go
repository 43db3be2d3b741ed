package dblocktest

import "time"

// SetHangBound sets how long the suite waits before it fails a call that
// does not return: the broken Lockers of its own tests wait by mistake,
// and a minute each would make the test slow for nothing.
func SetHangBound(d time.Duration) { hangBound = d }
