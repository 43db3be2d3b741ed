package torture_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
)

// record is one line of a worker's ledger. A holder writes a start record
// as soon as it has read the database clock with the lock held, and an end
// record when the hold ends (before releasing), so that a holder SIGKILLed
// mid-hold still leaves its start behind. All times are the database
// clock's, in µs since the epoch: no client clock enters the ledger.
type record struct {
	Kind string `json:"kind"` // "start" or "end"
	Hold int64  `json:"hold"` // numbers the holds of one process: pairs a start with its end
	Pid  int    `json:"pid"`

	Name  string `json:"name"`
	Token int64  `json:"token"`
	// At is, for a start, the first database-clock reading after Acquire
	// returned, taken before Lock.Err was checked and found nil; for an end,
	// the last such reading: the holder believed it held the lock from
	// start.At to end.At.
	At int64 `json:"at"`
	// Lost (end only) says the hold ended because the holder stopped
	// believing (Lock.Err turned non-nil or the clock read in a forupdate
	// transaction failed), not because it chose to release.
	Lost bool `json:"lost,omitempty"`
	// Ended (end only) is a database-clock reading taken after the last
	// belief, before release (0 if it failed): when the holder was running
	// again, which tells a hold frozen by SIGSTOP.
	Ended int64 `json:"ended,omitempty"`
}

// ledger appends records to a file, one JSON line per write(2) on an
// O_APPEND file, so a SIGKILL loses at most the line being written, which
// is then the file's last, unterminated line.
type ledger struct{ f *os.File }

func openLedger(path string) (*ledger, error) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	return &ledger{f}, err
}

func (l *ledger) add(r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = l.f.Write(append(b, '\n'))
	return err
}

func (l *ledger) close() error { return l.f.Close() }

// parseLedger reads one worker's ledger. Every line must be a complete
// record, except that the ledger of a worker that was SIGKILLed may end
// with a torn line (no newline: it died writing it), which is dropped.
func parseLedger(data []byte, killed bool) ([]record, error) {
	lines := bytes.Split(data, []byte("\n"))
	// After the last "\n" comes "" for a complete file, else the torn tail.
	tail := lines[len(lines)-1]
	lines = lines[:len(lines)-1]
	var out []record
	for i, line := range lines {
		r, err := parseRecord(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		out = append(out, r)
	}
	if len(tail) > 0 {
		r, err := parseRecord(tail)
		switch {
		case err == nil:
			out = append(out, r) // died between the record and its newline
		case !killed:
			return nil, fmt.Errorf("line %d: unterminated and unparsable (%v), but its worker was not killed", len(lines)+1, err)
		}
	}
	return out, nil
}

func parseRecord(line []byte) (record, error) {
	var r record
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("%q: %v", line, err)
	}
	if dec.More() {
		return r, fmt.Errorf("%q: more than one record", line)
	}
	if (r.Kind != "start" && r.Kind != "end") || r.Hold <= 0 || r.Pid <= 0 || r.Name == "" || r.At <= 0 {
		return r, fmt.Errorf("%q: not a well-formed record", line)
	}
	return r, nil
}

// readLedger reads the ledger file at path; see parseLedger.
func readLedger(path string, killed bool) ([]record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	recs, err := parseLedger(data, killed)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return recs, nil
}

// interval is one hold as its holder believed it: [Start, End] on the
// database clock.
type interval struct {
	Name       string
	Token      int64
	Start, End int64
	Pid        int
	// Open: the holder was SIGKILLed before writing the end record, so it
	// is taken to have believed until its kill time.
	Open  bool
	Lost  bool
	Ended int64
}

// intervals pairs start and end records. killedAt holds, for every pid
// that was SIGKILLed, a database-clock reading taken just before the
// signal; a start without an end from such a pid is held until then (or
// its own start, if it was written after that reading). A start without an
// end from any other process, an end without a start, or a pair that
// disagrees is an error: it means a worker lost records.
func intervals(recs []record, killedAt map[int]int64) ([]interval, []error) {
	type key struct {
		pid  int
		hold int64
	}
	starts, ends := map[key]record{}, map[key]record{}
	var errs []error
	for _, r := range recs {
		m := starts
		if r.Kind == "end" {
			m = ends
		}
		k := key{r.Pid, r.Hold}
		if _, dup := m[k]; dup {
			errs = append(errs, fmt.Errorf("pid %d hold %d: two %s records", r.Pid, r.Hold, r.Kind))
			continue
		}
		m[k] = r
	}
	var out []interval
	for k, s := range starts {
		iv := interval{Name: s.Name, Token: s.Token, Start: s.At, Pid: s.Pid}
		e, ended := ends[k]
		switch {
		case ended:
			delete(ends, k)
			if e.Name != s.Name || e.Token != s.Token {
				errs = append(errs, fmt.Errorf("pid %d hold %d: started as %s token %d, ended as %s token %d", k.pid, k.hold, s.Name, s.Token, e.Name, e.Token))
				continue
			}
			if e.At < s.At {
				errs = append(errs, fmt.Errorf("pid %d hold %d on %s: ends at %d before it starts at %d", k.pid, k.hold, s.Name, e.At, s.At))
				continue
			}
			iv.End, iv.Lost, iv.Ended = e.At, e.Lost, e.Ended
		default:
			killed, ok := killedAt[k.pid]
			if !ok {
				errs = append(errs, fmt.Errorf("pid %d hold %d on %s token %d: started at %d, never ended, and the worker was not killed", k.pid, k.hold, s.Name, s.Token, s.At))
				continue
			}
			iv.End, iv.Open = max(killed, s.At), true
		}
		out = append(out, iv)
	}
	for k, e := range ends {
		errs = append(errs, fmt.Errorf("pid %d hold %d on %s: an end without a start", k.pid, k.hold, e.Name))
	}
	return out, errs
}

// check proves the intervals consistent: per name, no interval begins
// before every earlier-starting one has ended, and tokens strictly grow in
// the order the holds began.
func check(ivs []interval) []error {
	byName := map[string][]interval{}
	for _, iv := range ivs {
		byName[iv.Name] = append(byName[iv.Name], iv)
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		es := byName[name]
		sort.Slice(es, func(i, j int) bool {
			if es[i].Start != es[j].Start {
				return es[i].Start < es[j].Start
			}
			return es[i].Token < es[j].Token
		})
		latest := es[0] // the interval that ends last among those seen
		for i := 1; i < len(es); i++ {
			prev, cur := es[i-1], es[i]
			if cur.Start <= latest.End {
				errs = append(errs, fmt.Errorf("%s: holds overlap: token %d (pid %d) believed [%d, %d]%s, token %d (pid %d) from %d",
					name, latest.Token, latest.Pid, latest.Start, latest.End, openNote(latest), cur.Token, cur.Pid, cur.Start))
			}
			if cur.Token <= prev.Token {
				errs = append(errs, fmt.Errorf("%s: token %d (pid %d, from %d) after token %d (pid %d, from %d): did not grow",
					name, cur.Token, cur.Pid, cur.Start, prev.Token, prev.Pid, prev.Start))
			}
			if cur.End > latest.End {
				latest = cur
			}
		}
	}
	return errs
}

func openNote(iv interval) string {
	if iv.Open {
		return " (no end record: held until its SIGKILL)"
	}
	return ""
}
