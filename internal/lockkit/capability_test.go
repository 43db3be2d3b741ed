package lockkit_test

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/logging"
)

// declaredLocker declares its logger and refuses dblock.Fair.
type declaredLocker struct {
	dblock.Locker
	logger *slog.Logger
}

// silentLocker declares nothing.
type silentLocker struct{ dblock.Locker }

func init() {
	lockkit.Declare(declaredLocker{}, lockkit.Capabilities{
		Logger: func(l dblock.Locker) *slog.Logger { return l.(declaredLocker).logger },
		CheckOptions: func(_ dblock.Locker, opts ...dblock.Option) error {
			if o, _ := lockinput.ResolveOptions(opts...); o.Fair {
				return &dblock.OptionError{Option: "Fair", Reason: "refused by declaredLocker"}
			}
			return nil
		},
	})
}

func TestLoggerOf(t *testing.T) {
	own := slog.New(slog.DiscardHandler)
	for _, c := range []struct {
		name   string
		locker dblock.Locker
		want   *slog.Logger
	}{
		{"declares a logger", declaredLocker{logger: own}, own},
		{"declares a nil logger", declaredLocker{}, logging.Default()},
		{"declares nothing", silentLocker{}, logging.Default()},
		{"nil", nil, logging.Default()},
	} {
		if got := lockkit.LoggerOf(c.locker); got != c.want {
			t.Errorf("%s: LoggerOf = %p, want %p", c.name, got, c.want)
		}
	}
}

func TestCheckOptionsAsksTheDeclaration(t *testing.T) {
	for _, c := range []struct {
		name   string
		locker dblock.Locker
		opts   []dblock.Option
		want   error
	}{
		{"declared, accepted", declaredLocker{}, []dblock.Option{dblock.TTL(1e9)}, nil},
		{"declared, refused", declaredLocker{}, []dblock.Option{dblock.Fair()}, dblock.ErrInvalidOption},
		{"undeclared accepts Fair", silentLocker{}, []dblock.Option{dblock.Fair()}, nil},
		{"invalid for everyone", silentLocker{}, []dblock.Option{dblock.TTL(0)}, dblock.ErrInvalidOption},
	} {
		if err := lockkit.CheckOptions(c.locker, c.opts...); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: CheckOptions = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestDeclareTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a second Declare of a type did not panic")
		}
	}()
	lockkit.Declare(declaredLocker{}, lockkit.Capabilities{})
}
