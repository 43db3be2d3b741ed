package cronguard

import (
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/robfig/cron/v3"
)

// TestDroppedCronIsForgotten: the names guarded on a Cron are kept no
// longer than the Cron, so an application that makes Crons and drops them
// does not grow cronNames.
func TestDroppedCronIsForgotten(t *testing.T) {
	key := func() weak.Pointer[cron.Cron] {
		c := cron.New()
		namesOf(c)["jobs/report"] = 1
		return weak.Make(c)
	}()
	known := func() bool {
		cronNames.Lock()
		defer cronNames.Unlock()
		_, ok := cronNames.m[key]
		return ok
	}
	deadline := time.Now().Add(30 * time.Second)
	for known() {
		if time.Now().After(deadline) {
			t.Fatal("a dropped Cron's names are still kept")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
