package hostile

import (
	"fmt"
	"slices"
)

// Snapshot is what a case's call could change, as text, so that any
// change at all shows.
type Snapshot struct {
	// Rows holds, per table, each row keyed by its lock name.
	Rows map[string]map[string]string
	// Counters are values shared by every name (a token sequence): they
	// may move only when the call may write.
	Counters map[string]string
}

// AddRows records table's rows, keyed by lock name.
func (s *Snapshot) AddRows(table string, rows map[string]string) {
	if s.Rows == nil {
		s.Rows = map[string]map[string]string{}
	}
	s.Rows[table] = rows
}

// AddCounter records a counter's value.
func (s *Snapshot) AddCounter(name, value string) {
	if s.Counters == nil {
		s.Counters = map[string]string{}
	}
	s.Counters[name] = value
}

// Diff describes every change from s to after, other than the rows of
// writes and, when there are writes, the counters.
func (s Snapshot) Diff(after Snapshot, writes []string) []string {
	var diffs []string
	for _, table := range Keys(s.Rows, after.Rows) {
		before, after := s.Rows[table], after.Rows[table]
		for _, name := range Keys(before, after) {
			if slices.Contains(writes, name) {
				continue
			}
			b, inB := before[name]
			a, inA := after[name]
			if inB != inA || a != b {
				diffs = append(diffs, fmt.Sprintf("%s row %s changed:\n\tbefore %q (exists %v)\n\tafter  %q (exists %v)",
					table, short(name), b, inB, a, inA))
			}
		}
	}
	if len(writes) == 0 {
		for _, counter := range Keys(s.Counters, after.Counters) {
			if b, a := s.Counters[counter], after.Counters[counter]; b != a {
				diffs = append(diffs, fmt.Sprintf("counter %s moved: %s before, %s after", counter, b, a))
			}
		}
	}
	return diffs
}

// short quotes a name for a message, cut if long (a 10 MB name).
func short(s string) string {
	if len(s) > 60 {
		return fmt.Sprintf("%q... (%d bytes)", s[:60], len(s))
	}
	return fmt.Sprintf("%q", s)
}
