package lockkit

import (
	"fmt"
	"log/slog"
	"reflect"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/logging"
)

// Capabilities is what a Locker type of this module declares about its
// values to the module's other packages (cronguard, gocronlock, leader),
// which are handed a dblock.Locker: declared here, and not sniffed
// through exported helper methods on the Locker. A nil field declares
// nothing.
type Capabilities struct {
	// Logger returns the logger l logs to, for code built on l to log
	// there too.
	Logger func(l dblock.Locker) *slog.Logger
	// CheckOptions reports, without I/O, whether l's Acquire and
	// TryAcquire accept opts: nil, or the error they would return,
	// wrapping dblock.ErrInvalidOption. Code that acquires with the same
	// options on every run (a cron guard, a leader) asks it once when it
	// is built: a refusal would otherwise come back on every run, long
	// after the configuration was written, and often only in a log nobody
	// reads.
	CheckOptions func(l dblock.Locker, opts ...dblock.Option) error
}

// declared maps a Locker's dynamic type to its Capabilities. It is written
// only by Declare, from package init functions, which run before any
// goroutine of the program can read it.
var declared = map[reflect.Type]Capabilities{}

// Declare records the Capabilities of the values of sample's type. Call it
// from an init function, once per type.
func Declare(sample dblock.Locker, c Capabilities) {
	t := reflect.TypeOf(sample)
	if _, dup := declared[t]; dup {
		panic(fmt.Sprintf("lockkit: capabilities of %v declared twice", t))
	}
	declared[t] = c
}

// LoggerOf returns the logger l declares (Capabilities.Logger), else
// logging.Default().
func LoggerOf(l dblock.Locker) *slog.Logger {
	if c, ok := declared[reflect.TypeOf(l)]; ok && c.Logger != nil {
		if logger := c.Logger(l); logger != nil {
			return logger
		}
	}
	return logging.Default()
}

// CheckOptions validates opts (ResolveOptions) and, if l declares
// Capabilities.CheckOptions, asks l whether it accepts them. A Locker
// that declares none accepts every option ResolveOptions accepts. It does
// no I/O. Errors wrap dblock.ErrInvalidOption.
func CheckOptions(l dblock.Locker, opts ...dblock.Option) error {
	if _, err := lockinput.ResolveOptions(opts...); err != nil {
		return err
	}
	if c, ok := declared[reflect.TypeOf(l)]; ok && c.CheckOptions != nil {
		if err := c.CheckOptions(l, opts...); err != nil {
			return fmt.Errorf("the Locker (%T) refuses the options: %w", l, err)
		}
	}
	return nil
}
