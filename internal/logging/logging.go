// Package logging is how sqllock's packages log. A Locker takes the
// application's *slog.Logger (rowlock.WithLogger, forupdate.WithLogger), and
// everything built on it logs there too: its fair queue, and the leader
// elections, cron guards and reaper that use the Locker (lockkit.LoggerOf). Given no
// logger, they log through slog.Default() at Warn and above (Default).
package logging

import (
	"context"
	"log/slog"
	"slices"
)

// DefaultLevel is the lowest level the default logger passes on: what an
// operator must act on (a lock lost, renewals or heartbeats failing,
// waiters falling back to polling, a sweep or a campaign failing), without
// a line for every election or sweep.
const DefaultLevel = slog.LevelWarn

// Default returns the logger sqllock uses when given none: records at
// DefaultLevel and above go to the handler of slog.Default() at the moment
// they are logged, so an application that calls slog.SetDefault after
// building its Lockers still gets them.
func Default() *slog.Logger { return defaultLogger }

var defaultLogger = slog.New(defaultHandler{})

// defaultHandler forwards to slog.Default()'s handler, with the attributes
// and groups it was given applied in order.
type defaultHandler struct {
	derive []func(slog.Handler) slog.Handler
}

func (h defaultHandler) target() slog.Handler {
	t := slog.Default().Handler()
	for _, d := range h.derive {
		t = d(t)
	}
	return t
}

func (h defaultHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= DefaultLevel && slog.Default().Handler().Enabled(ctx, level)
}

func (h defaultHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.target().Handle(ctx, r)
}

func (h defaultHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return defaultHandler{derive: append(slices.Clip(h.derive), func(t slog.Handler) slog.Handler { return t.WithAttrs(attrs) })}
}

func (h defaultHandler) WithGroup(name string) slog.Handler {
	return defaultHandler{derive: append(slices.Clip(h.derive), func(t slog.Handler) slog.Handler { return t.WithGroup(name) })}
}
