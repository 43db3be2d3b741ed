package testdb

import (
	"testing"
	"time"
)

// CheckEachTickOnce checks a test of replicas running one scheduled job:
// fired counts, per tick, the replicas that fired it; ran counts the job's
// runs. Every tick fired must have run exactly once, no tick may have run
// that no replica fired, and at least minContended ticks must have been
// fired by all replicas (the edges of a run may see fewer), so that the
// test cannot pass without the replicas competing.
func CheckEachTickOnce(t testing.TB, fired, ran map[time.Time]int, replicas, minContended int) {
	t.Helper()
	contended := 0
	for tick, n := range fired {
		if ran[tick] != 1 {
			t.Errorf("tick %v fired by %d replicas ran %d times, want exactly once", tick.Format(time.TimeOnly), n, ran[tick])
		}
		if n == replicas {
			contended++
		}
	}
	for tick, n := range ran {
		if fired[tick] == 0 {
			t.Errorf("tick %v ran %d times but no replica fired it", tick.Format(time.TimeOnly), n)
		}
	}
	if contended < minContended {
		t.Errorf("only %d ticks were fired by all %d replicas, want at least %d (of %d ticks)", contended, replicas, minContended, len(fired))
	}
}
