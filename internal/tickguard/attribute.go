package tickguard

import "time"

// lastHold is how long the lock of a schedule's last activation is held:
// no next activation bounds its window, and a day outlasts any replica's
// lateness.
const lastHold = 24 * time.Hour

// Attribute returns the activation of a schedule nearest to fired (tick),
// and the end of that activation's window, halfway to the activation after
// it. next is the schedule's Next. It returns the first activation
// strictly after its argument, or the zero time when there is none. ok is false when the
// schedule has no activation at all around fired.
//
// Every replica that fires within half a gap of an activation attributes
// its run to that activation, whether it fires early or late, so a lock
// held until the window's end covers every replica firing that activation
// and none firing the next.
//
// It calls next at most about 70 times, whatever the schedule: the
// activation before fired is found by bisection, not by stepping through
// the activations.
func Attribute(next func(time.Time) time.Time, fired time.Time) (tick, windowEnd time.Time, ok bool) {
	after := next(fired)
	before, found := latestUpTo(next, fired, after)
	switch {
	case found && (after.IsZero() || fired.Sub(before) <= after.Sub(fired)):
		tick = before
	case !after.IsZero():
		tick = after
	default:
		return time.Time{}, time.Time{}, false
	}
	following := next(tick)
	if following.IsZero() {
		return tick, tick.Add(lastHold), true
	}
	return tick, tick.Add(following.Sub(tick) / 2), true
}

// latestUpTo returns the latest activation at or before fired, looking back
// no further than after is ahead of fired (an activation further back is
// not the nearest), or a day when there is no activation after.
//
// next(x) is the first activation after x, so it does not decrease as x
// grows, and next(x) <= fired holds exactly for x before the latest
// activation up to fired: bisect for the last such x.
func latestUpTo(next func(time.Time) time.Time, fired, after time.Time) (time.Time, bool) {
	back := lastHold
	if !after.IsZero() {
		back = after.Sub(fired)
	}
	lo, hi := fired.Add(-back-time.Nanosecond), fired
	if a := next(lo); a.IsZero() || a.After(fired) {
		return time.Time{}, false
	}
	// lo: next(lo) <= fired; hi: next(hi) > fired.
	for hi.Sub(lo) > time.Nanosecond {
		mid := lo.Add(hi.Sub(lo) / 2)
		if a := next(mid); !a.IsZero() && !a.After(fired) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return next(lo), true
}
