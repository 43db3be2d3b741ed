package rowlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// pastDeadline is a context whose deadline has passed but that has not
// been told yet (Err is nil): the moment in which a driver dialing with the
// deadline already fails with "i/o timeout".
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Second), true }

// TestDeadlineBeforeContextKnowsIt: a try whose statement fails (here: no
// connection can be had) once the caller's deadline has passed is not
// acquired because of the deadline, as when ctx.Err says so; the driver's
// error is not the caller's.
func TestDeadlineBeforeContextKnowsIt(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			proxy := testdb.NewProxy(t, tg.HostPort())
			proxy.Cut()
			l := newLocker(t, testdb.Open(t, tg, tg.DSNVia(proxy.Addr())))
			ctx := pastDeadline{t.Context()}
			for call, acquire := range map[string]func() (dblock.Lock, error){
				"TryAcquire": func() (dblock.Lock, error) { return l.TryAcquire(ctx, testdb.Name(t)) },
				"Acquire":    func() (dblock.Lock, error) { return l.Acquire(ctx, testdb.Name(t)) },
			} {
				_, err := acquire()
				if !errors.Is(err, dblock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%s with its deadline passed and no connection: %v, want ErrNotAcquired and DeadlineExceeded", call, err)
				}
			}
		})
	}
}
