package hostile

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The harness's own judgement, without a database: a Diff that missed a
// change would let every hostile case pass whatever the Locker wrote.
func TestDiff(t *testing.T) {
	snap := func(rows map[string]string, counter string) Snapshot {
		var s Snapshot
		s.AddRows("locks", rows)
		s.AddCounter("tokens", counter)
		return s
	}
	before := snap(map[string]string{"a": "1", "b": "1"}, "7")
	for _, tc := range []struct {
		name   string
		after  Snapshot
		writes []string
		want   []string // substrings, one a diff, in order
	}{
		{name: "unchanged", after: snap(map[string]string{"a": "1", "b": "1"}, "7")},
		{name: "row changed", after: snap(map[string]string{"a": "2", "b": "1"}, "7"), want: []string{`locks row "a" changed`}},
		{name: "row added", after: snap(map[string]string{"a": "1", "b": "1", "c": "1"}, "7"), want: []string{`locks row "c"`}},
		{name: "row deleted", after: snap(map[string]string{"a": "1"}, "7"), want: []string{`locks row "b"`}},
		{name: "counter moved", after: snap(map[string]string{"a": "1", "b": "1"}, "8"), want: []string{"counter tokens moved: 7 before, 8 after"}},
		{name: "allowed writes move rows and counters", after: snap(map[string]string{"a": "1", "b": "2", "c": "1"}, "9"),
			writes: []string{"b", "c"}},
		{name: "an allowed write excuses only its own row", after: snap(map[string]string{"a": "2", "b": "2"}, "7"),
			writes: []string{"b"}, want: []string{`locks row "a"`}},
		{name: "a table appearing counts", after: func() Snapshot {
			s := snap(map[string]string{"a": "1", "b": "1"}, "7")
			s.AddRows("waiters", map[string]string{"a": "1"})
			return s
		}(), want: []string{`waiters row "a"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := before.Diff(tc.after, tc.writes)
			if len(got) != len(tc.want) {
				t.Fatalf("Diff = %q, want %d diffs like %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("diff %d = %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}

func TestDiffShortensLongNames(t *testing.T) {
	long := strings.Repeat("n", 10<<20)
	var before, after Snapshot
	before.AddRows("locks", map[string]string{})
	after.AddRows("locks", map[string]string{long: "1"})
	got := before.Diff(after, nil)
	if len(got) != 1 || len(got[0]) > MaxMessage {
		t.Fatalf("Diff of a 10 MB name: %d diffs, first %d bytes", len(got), len(got[0]))
	}
}

func TestExactLength(t *testing.T) {
	for _, prefix := range []string{"", "p/", "prefix-of-seven/"} {
		for _, total := range []int{255, 256, 257} {
			s := ExactLength(prefix, total)
			if len(s) != total || !strings.HasPrefix(s, prefix) || !utf8.ValidString(s) {
				t.Errorf("ExactLength(%q, %d): %d bytes, valid UTF-8 %v", prefix, total, len(s), utf8.ValidString(s))
			}
			// Cut one byte short, the last emoji breaks: that is what
			// "name cut inside a rune" relies on.
			if cut := s[:total-1]; utf8.ValidString(cut) {
				t.Errorf("ExactLength(%q, %d) cut by a byte is still valid UTF-8", prefix, total)
			}
		}
	}
}
