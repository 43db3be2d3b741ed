package cronguard_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sqllock/sqllock/cronguard"
	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestGuardLogsToTheLockersLogger: a guard has no logger of its own; it
// logs where the Locker it is given logs (rowlock.WithLogger,
// forupdate.WithLogger).
func TestGuardLogsToTheLockersLogger(t *testing.T) {
	// Servers only: the forupdate case has no SQLite.
	for _, tg := range testdb.Targets(t) {
		for _, kind := range []struct {
			name string
			new  func(logger *slog.Logger) (dblock.Locker, func() error, error)
		}{
			{"rowlock", func(logger *slog.Logger) (dblock.Locker, func() error, error) {
				l, err := rowlock.New(tg.DB, rowlock.WithLogger(logger))
				if err != nil {
					return nil, nil, err
				}
				return l, l.Close, nil
			}},
			{"forupdate", func(logger *slog.Logger) (dblock.Locker, func() error, error) {
				l, err := forupdate.New(tg.DB, forupdate.WithLogger(logger))
				if err != nil {
					return nil, nil, err
				}
				return l, l.Close, nil
			}},
		} {
			t.Run(tg.Name+"/"+kind.name, func(t *testing.T) {
				var logs lockedBuffer
				logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				l, closeLocker, err := kind.new(logger)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = closeLocker() })
				holderLocker, closeHolder, err := kind.new(slog.New(slog.DiscardHandler))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = closeHolder() })

				name := testdb.Name(t)
				holder, err := holderLocker.TryAcquire(t.Context(), name)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = holder.Release(t.Context()) }()
				ran := false
				guarded(t, l, name, grid{phase: time.Now(), period: time.Hour}, cron.FuncJob(func() { ran = true }), cronguard.WithLockOptions(dblock.MinHold(0))).Run()
				if ran {
					t.Fatal("the job ran while the lock was held elsewhere")
				}
				want := `msg="cronguard: run skipped: lock held elsewhere" name=` + name
				if !strings.Contains(logs.String(), want) {
					t.Errorf("the Locker's logger got %q, want a line with %q", logs.String(), want)
				}
			})
		}
	}
}

// TestGuardWithLogger: given WithLogger, a guard logs there, not where
// its Locker does.
func TestGuardWithLogger(t *testing.T) {
	tg := testdb.AllTargets(t)[0]
	var logs, lockers lockedBuffer
	l, err := rowlock.New(tg.DB, rowlock.WithLogger(slog.New(slog.NewTextHandler(&lockers, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	name := testdb.Name(t)
	holder, err := l.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Release(t.Context()) }()
	own := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	guarded(t, l, name, grid{phase: time.Now(), period: time.Hour}, cron.FuncJob(func() {}), cronguard.WithLockOptions(dblock.MinHold(0)), cronguard.WithLogger(own)).Run()
	want := `msg="cronguard: run skipped: lock held elsewhere" name=` + name
	if !strings.Contains(logs.String(), want) {
		t.Errorf("WithLogger's logger got %q, want a line with %q", logs.String(), want)
	}
	if strings.Contains(lockers.String(), "cronguard:") {
		t.Errorf("the Locker's logger got the guard's lines: %q", lockers.String())
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *lockedBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *lockedBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
