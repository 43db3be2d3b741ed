package lockkit

import (
	"fmt"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
)

// OptionChecker is implemented by Lockers that refuse some acquisition
// options every time (forupdate refuses Fair and a positive MinHold). Code
// that is handed a Locker and acquires with the same options on every run,
// such as CronGuard, gocronlock and Leader, asks it once when it is built:
// a refusal would otherwise come back on every run, long after the
// configuration was written, and often only in a log nobody reads.
//
// A Locker that does not implement OptionChecker accepts every option that
// ResolveOptions accepts.
type OptionChecker interface {
	// CheckOptions reports, without I/O, whether Acquire and TryAcquire
	// accept opts: nil, or the error they would return, wrapping
	// dblock.ErrInvalidOption.
	CheckOptions(opts ...dblock.Option) error
}

// CheckOptions validates opts (ResolveOptions) and, if l implements
// OptionChecker, asks l whether it accepts them. It does no I/O. Errors
// wrap dblock.ErrInvalidOption.
func CheckOptions(l dblock.Locker, opts ...dblock.Option) error {
	if _, err := lockinput.ResolveOptions(opts...); err != nil {
		return err
	}
	if c, ok := l.(OptionChecker); ok {
		if err := c.CheckOptions(opts...); err != nil {
			return fmt.Errorf("the Locker (%T) refuses the options: %w", l, err)
		}
	}
	return nil
}
