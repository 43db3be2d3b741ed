package rowlock

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock/internal/testdb"
)

// armLate is a store whose first wantWake waits until the test has had
// the lock released: the real statements, in the order a slow arming
// meets them in a live system.
type armLate struct {
	store
	once     sync.Once
	arming   chan struct{} // closed when the first wantWake starts
	released chan struct{} // closed by the test once the holder released
}

func (s *armLate) wantWake(ctx context.Context, name string, h holderInfo) (bool, holderInfo, error) {
	s.once.Do(func() {
		close(s.arming)
		<-s.released
	})
	return s.store.wantWake(ctx, name, h)
}

// TestHoldEndedBeforeItsArming: a waiter whose failed try met a hold that
// is released (in another process) before the waiter asks for a wake-up
// tries again at once and takes the lock. There was no hold left to arm,
// so no announcement will come; a waiter that slept instead, here for an
// hour, would hang to the test's liveness bound (it did, about once in
// fifteen runs of TestWokenAcrossProcesses, where the release fell into
// that window by chance).
func TestHoldEndedBeforeItsArming(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			name := testdb.Name(t)
			child := testdb.Child(t, "TestChildHolderReleasesOnSignal", "SQLLOCK_CHILD_LOCK="+name, "SQLLOCK_CHILD_DIALECT="+tg.Name)
			if _, err := child.WaitLine(ctx, "held "); err != nil {
				t.Fatal(err)
			}
			l, err := New(tg.DB, WithPollInterval(time.Hour, time.Hour), WithIdleRecheck(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			late := &armLate{store: l.store, arming: make(chan struct{}), released: make(chan struct{})}
			l.store = late // before any call: nothing runs yet
			got := make(chan error, 1)
			go func() {
				k, err := l.Acquire(ctx, name)
				if err == nil {
					err = k.Release(context.Background())
				}
				got <- err
			}()
			select {
			case <-late.arming:
			case <-ctx.Done():
				t.Fatal("the waiter never asked for a wake-up")
			}
			if err := child.Cmd.Process.Signal(syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
			if _, err := child.WaitLine(ctx, "released"); err != nil {
				t.Fatal(err)
			}
			close(late.released)
			if err := <-got; err != nil {
				t.Fatalf("Acquire, its holder released before it asked for a wake-up: %v", err)
			}
		})
	}
}
