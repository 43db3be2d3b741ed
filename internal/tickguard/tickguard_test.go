package tickguard

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sqllock/sqllock/dblock"
)

// TestNameFits: every run's name fits in a lock name, keeps its base when it
// fits, and tells apart long bases that differ only past the cut; a cut
// never splits a UTF-8 sequence.
func TestNameFits(t *testing.T) {
	fired := time.Date(2025, 1, 2, 3, 4, 5, 400_000_000, time.UTC)
	long := strings.Repeat("é", dblock.MaxNameLength) // 2 bytes a rune
	cases := []struct {
		what string
		tick time.Duration
		base string
		want string // "" when the name is shortened
	}{
		{"short, per tick", time.Second, "jobs/report", "jobs/report@2025-01-02T03:04:05Z"},
		{"short, sub-second tick", 100 * time.Millisecond, "j", "j@2025-01-02T03:04:05.4Z"},
		{"short, one name", 0, "jobs/report", "jobs/report"},
		{"exactly the limit, one name", 0, strings.Repeat("n", dblock.MaxNameLength), strings.Repeat("n", dblock.MaxNameLength)},
		{"long, per tick", time.Second, long, ""},
		{"long, one name", 0, long, ""},
		{"long ASCII, per tick", time.Minute, strings.Repeat("n", 1000), ""},
	}
	for _, c := range cases {
		g := &Guard{cfg: Config{Tick: c.tick}}
		name, tick := g.Name(c.base, fired)
		if len(name) > dblock.MaxNameLength || !utf8.ValidString(name) {
			t.Errorf("%s: name of %d bytes (valid UTF-8: %v)", c.what, len(name), utf8.ValidString(name))
		}
		if (c.tick == 0) != tick.IsZero() {
			t.Errorf("%s: tick %v with WithTick(%v)", c.what, tick, c.tick)
		}
		if c.want != "" && name != c.want {
			t.Errorf("%s: name %q, want %q", c.what, name, c.want)
		}
		if c.want == "" {
			other, _ := g.Name(c.base+"2", fired)
			again, _ := g.Name(c.base, fired)
			if other == name || again != name {
				t.Errorf("%s: %q and %q for bases differing at the end; %q again", c.what, name, other, again)
			}
			if !strings.HasPrefix(c.base, name[:strings.LastIndexByte(name, '~')]) {
				t.Errorf("%s: %q does not start with the base's first bytes", c.what, name)
			}
		}
	}
}

func TestValidateBase(t *testing.T) {
	for base, ok := range map[string]bool{
		"jobs/report":                      true,
		strings.Repeat("n", 1000):          true,
		"":                                 false,
		"nul\x00":                          false,
		"bad\xff":                          false,
		strings.Repeat("n", 1000) + "\x00": false,
		strings.Repeat("n", 1000) + "\xff": false,
		"\x00" + strings.Repeat("n", 1000): false,
	} {
		if err := ValidateBase(base); (err == nil) != ok {
			t.Errorf("ValidateBase(%.20q...) = %v, want ok=%v", base, err, ok)
		}
	}
}
