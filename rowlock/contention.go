package rowlock

import (
	"context"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

// contentionPause separates rounds of dblock.RetryContention.
const contentionPause = 10 * time.Millisecond

// retryContention runs op until it succeeds, fails with an error that is not
// contention, or ctx ends. Contention (deadlocks, lock wait timeouts,
// serialization failures, unique violations between contenders) passes: it
// is retried in rounds of dblock.RetryContention, a pause between rounds, so
// a budget that runs out never turns into an error. When ctx ends first,
// its error is returned with the contention only in the text: callers see
// a context error, never the driver's contention error.
func retryContention(ctx context.Context, op func() error) error {
	for {
		err := dblock.RetryContention(ctx, op)
		if err == nil || dblock.ClassifyError(err) != dblock.ClassContention {
			return err
		}
		timer := time.NewTimer(contentionPause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%w (while retrying after contention: %v)", ctx.Err(), err)
		case <-timer.C:
		}
	}
}
