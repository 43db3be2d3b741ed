package lockkit_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
)

// maxErrorMessage bounds what an error may echo of its input: a 10 MB name
// must not come back as a 10 MB error message (in logs, in HTTP replies).
const maxErrorMessage = 512

// nameIsValid is the contract ValidateName implements, written out
// independently: 1 to MaxNameLength bytes of UTF-8 without NUL.
func nameIsValid(name string) bool {
	return len(name) >= 1 && len(name) <= dblock.MaxNameLength &&
		utf8.ValidString(name) && !strings.ContainsRune(name, 0)
}

func FuzzValidateName(f *testing.F) {
	for _, seed := range []string{
		"jobs/nightly",
		"",
		"a",
		strings.Repeat("x", dblock.MaxNameLength),
		strings.Repeat("x", dblock.MaxNameLength+1),
		strings.Repeat("😀", 63) + "xyz", // 255 bytes
		strings.Repeat("😀", 64),         // 256 bytes
		strings.Repeat("x", 254) + "é",  // 256 bytes, last rune straddles the limit
		"bad\xffutf8",
		"\xed\xa0\x80", // a lone UTF-16 surrogate, as CESU-8
		"\xc0\x80",     // overlong NUL (Java's modified UTF-8)
		"nul\x00byte",
		"\x00",
		"x'; DROP TABLE dblock_locks; --",
		"%_\\",
		"a ",
		"e\u0301",
		"\ufeffbom",
		"\u202eright-to-left",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := lockinput.ValidateName(name)
		if err == nil {
			if !nameIsValid(name) {
				t.Fatalf("ValidateName(%q) accepted a name that is not 1..%d bytes of UTF-8 without NUL", name, dblock.MaxNameLength)
			}
			return
		}
		if nameIsValid(name) {
			t.Fatalf("ValidateName(%q) = %v, want nil", name, err)
		}
		if !errors.Is(err, dblock.ErrInvalidName) {
			t.Fatalf("ValidateName(%q) = %v, want an error wrapping ErrInvalidName", name, err)
		}
		var ne *dblock.NameError
		if !errors.As(err, &ne) || ne.Name != name {
			t.Fatalf("ValidateName(%q) = %#v, want a *NameError carrying the name", name, err)
		}
		if msg := err.Error(); len(msg) > maxErrorMessage {
			t.Fatalf("ValidateName: error message of %d bytes for a %d-byte name", len(msg), len(name))
		}
	})
}

func FuzzResolveOptions(f *testing.F) {
	type seed struct {
		setTTL      bool
		ttl         int64
		minHold     int64
		note        string
		fair        bool
		nilOptionAt int
	}
	for _, s := range []seed{
		{false, 0, 0, "", false, -1},
		{true, int64(dblock.MinTTL), 0, "", false, -1},
		{true, int64(dblock.MinTTL) - 1, 0, "", false, -1},
		{true, 0, 0, "", false, -1},
		{true, -1, 0, "", false, -1},
		{true, math.MinInt64, 0, "", false, -1},
		{true, math.MaxInt64, math.MaxInt64, "", true, -1},
		{true, int64(time.Second), -1, "", false, -1},
		{true, int64(time.Second), 0, strings.Repeat("n", dblock.MaxNoteLength), false, -1},
		{true, int64(time.Second), 0, strings.Repeat("n", dblock.MaxNoteLength+1), false, -1},
		{true, int64(time.Second), 0, strings.Repeat("é", dblock.MaxNoteLength/2), false, -1},
		{true, int64(time.Second), 0, "bad\xffnote", false, -1},
		{true, int64(time.Second), 0, "nul\x00note", false, -1},
		{true, int64(time.Second), 0, "x'; DROP TABLE dblock_locks; --", true, -1},
		{true, int64(time.Second), 0, "", false, 0},
		{false, 0, 0, "fine", true, 3},
	} {
		f.Add(s.setTTL, s.ttl, s.minHold, s.note, s.fair, s.nilOptionAt)
	}
	f.Fuzz(func(t *testing.T, setTTL bool, ttl, minHold int64, note string, fair bool, nilOptionAt int) {
		var opts []dblock.Option
		if setTTL {
			opts = append(opts, dblock.TTL(time.Duration(ttl)))
		}
		opts = append(opts, dblock.MinHold(time.Duration(minHold)), dblock.Note(note))
		if fair {
			opts = append(opts, dblock.Fair())
		}
		hasNil := nilOptionAt >= 0 && nilOptionAt <= len(opts)
		if hasNil {
			opts = append(opts[:nilOptionAt], append([]dblock.Option{nil}, opts[nilOptionAt:]...)...)
		}

		wantTTL := dblock.DefaultTTL
		if setTTL {
			wantTTL = time.Duration(ttl)
		}
		// The note must be storable by both databases: PostgreSQL text
		// cannot hold NUL, so it is rejected like a NUL in a name.
		noteOK := len(note) <= dblock.MaxNoteLength && utf8.ValidString(note) && !strings.ContainsRune(note, 0)
		valid := !hasNil && wantTTL >= dblock.MinTTL && minHold >= 0 && noteOK

		o, err := lockinput.ResolveOptions(opts...)
		if !valid {
			if err == nil {
				t.Fatalf("ResolveOptions(ttl %v set %v, minHold %v, note %q, nil at %d) accepted invalid options: %+v",
					wantTTL, setTTL, time.Duration(minHold), note, nilOptionAt, o)
			}
			if !errors.Is(err, dblock.ErrInvalidOption) {
				t.Fatalf("ResolveOptions: %v, want an error wrapping ErrInvalidOption", err)
			}
			var oe *dblock.OptionError
			if !errors.As(err, &oe) {
				t.Fatalf("ResolveOptions: %#v, want a *OptionError", err)
			}
			if msg := err.Error(); len(msg) > maxErrorMessage {
				t.Fatalf("ResolveOptions: error message of %d bytes", len(msg))
			}
			if o != (dblock.Options{}) {
				t.Fatalf("ResolveOptions returned %+v with its error, want the zero Options", o)
			}
			return
		}
		if err != nil {
			t.Fatalf("ResolveOptions(ttl %v, minHold %v, note %q, fair %v) = %v, want nil",
				wantTTL, time.Duration(minHold), note, fair, err)
		}
		want := dblock.Options{TTL: wantTTL, MinHold: time.Duration(minHold), Fair: fair, Note: note}
		if o != want {
			t.Fatalf("ResolveOptions = %+v, want %+v", o, want)
		}
	})
}
