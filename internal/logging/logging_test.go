package logging_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/sqllock/sqllock/internal/logging"
)

// TestDefault checks that the default logger passes Warn and above to the
// slog.Default() of the moment, with the attributes and groups derived
// loggers add, and nothing below Warn. Not parallel: it sets slog.Default.
func TestDefault(t *testing.T) {
	before := logging.Default().With("component", "test").WithGroup("lock")
	var out bytes.Buffer
	previous := slog.Default()
	t.Cleanup(func() { slog.SetDefault(previous) })
	// Set after the loggers above were made: they must follow it.
	slog.SetDefault(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))

	for _, c := range []struct {
		log  func()
		want string // "" : nothing
	}{
		{func() { logging.Default().Debug("debug") }, ""},
		{func() { logging.Default().Info("info") }, ""},
		{func() { logging.Default().Warn("warn", "k", 1) }, `level=WARN msg=warn k=1`},
		{func() { logging.Default().Error("error") }, `level=ERROR msg=error`},
		{func() { before.Info("derived info") }, ""},
		{func() { before.Warn("derived", "name", "x") }, `level=WARN msg=derived component=test lock.name=x`},
	} {
		out.Reset()
		c.log()
		got := strings.TrimSpace(out.String())
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("logged %q, want %q", got, c.want)
		}
	}

	// An application's default that drops Warn is obeyed.
	slog.SetDefault(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelError})))
	out.Reset()
	logging.Default().Warn("dropped")
	if out.Len() != 0 {
		t.Errorf("logged %q through a default handler at Error", out.String())
	}
}
