package tickguard

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sqllock/sqllock/dblock"
)

// TestNameFits: every job's lock name fits in a lock name, is the job's
// name when it fits, and tells apart long names that differ only past the
// cut; a cut never splits a UTF-8 sequence.
func TestNameFits(t *testing.T) {
	long := strings.Repeat("é", dblock.MaxNameLength) // 2 bytes a rune
	cases := []struct {
		what string
		base string
		want string // "" when the name is shortened
	}{
		{"short", "jobs/report", "jobs/report"},
		{"exactly the limit", strings.Repeat("n", dblock.MaxNameLength), strings.Repeat("n", dblock.MaxNameLength)},
		{"long", long, ""},
		{"long ASCII", strings.Repeat("n", 1000), ""},
	}
	for _, c := range cases {
		name := Name(c.base)
		if len(name) > dblock.MaxNameLength || !utf8.ValidString(name) {
			t.Errorf("%s: name of %d bytes (valid UTF-8: %v)", c.what, len(name), utf8.ValidString(name))
		}
		if c.want != "" && name != c.want {
			t.Errorf("%s: name %q, want %q", c.what, name, c.want)
		}
		if c.want == "" {
			if other, again := Name(c.base+"2"), Name(c.base); other == name || again != name {
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
