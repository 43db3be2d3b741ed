package wake

import (
	"context"
	"errors"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

// Sleeper is what a waiter keeps between two tries: its place on the
// List, its pacer, whether the Locker's session listens, and its timer.
// Acquire's waiter and the kinds' waiter both embed one.
type Sleeper struct {
	W     *Waiter
	Pacer Pacer
	// Listening is true while the Locker's session listens: a release of
	// another Locker that the waiter asked to be told of wakes it.
	Listening bool
	timer     *time.Timer // made at the first sleep; most calls never sleep
}

// Sleep waits for pause to pass, a wake-up (woken), or ctx to end (the
// error then joins dblock.ErrNotAcquired and ctx.Err()). A waiter that
// listened then asks listening whether the session still listens, which
// restarts it if it stopped (a lost connection).
func (s *Sleeper) Sleep(ctx context.Context, pause time.Duration, listening func(context.Context) bool) (woken bool, err error) {
	if s.timer == nil {
		s.timer = time.NewTimer(pause)
	} else {
		s.timer.Reset(pause)
	}
	select {
	case <-ctx.Done():
		return false, errors.Join(dblock.ErrNotAcquired, ctx.Err())
	case <-s.W.wake:
		s.Pacer.Reset()
		woken = true
	case <-s.timer.C:
	}
	if s.Listening {
		s.Listening = listening(ctx)
	}
	return woken, nil
}

// StopTimer stops the timer, if one was made.
func (s *Sleeper) StopTimer() {
	if s.timer != nil {
		s.timer.Stop()
	}
}
