package lockkit

import (
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

func TestFailoverPauseRules(t *testing.T) {
	for _, c := range []struct {
		name       string
		dialect    dblock.Dialect
		p, ttl     time.Duration
		pause      time.Duration // FailoverPause
		belief     time.Duration // Belief(ttl, pause)
		validPause bool
	}{
		{"postgres, P shorter than the TTL", dblock.Postgres, 30 * time.Second, time.Minute, 30 * time.Second, 30 * time.Second, true},
		{"postgres, P longer than the TTL", dblock.Postgres, 30 * time.Second, 10 * time.Second, 30 * time.Second, 10 * time.Second, true},
		{"postgres, pause off", dblock.Postgres, 0, time.Minute, 0, time.Minute, true},
		{"mysql ignores P", dblock.MySQL, 30 * time.Second, time.Minute, 0, time.Minute, true},
		{"P below MinTTL", dblock.Postgres, dblock.MinTTL / 2, time.Minute, dblock.MinTTL / 2, dblock.MinTTL / 2, false},
		{"negative P", dblock.Postgres, -time.Second, time.Minute, -time.Second, time.Minute, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pause := FailoverPause(c.dialect, c.p)
			if pause != c.pause {
				t.Errorf("FailoverPause = %v, want %v", pause, c.pause)
			}
			if got := Belief(c.ttl, pause); got != c.belief {
				t.Errorf("Belief = %v, want %v", got, c.belief)
			}
			if got := ValidFailoverPause(c.p); got != c.validPause {
				t.Errorf("ValidFailoverPause = %v, want %v", got, c.validPause)
			}
		})
	}
}
