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
	// Slot is a semaphore permit's slot (Permit.Slot).
	Slot int `json:"slot,omitempty"`
	// Write marks a read/write lock's write hold; its other holds read.
	Write bool `json:"write,omitempty"`
	// Names and Tokens are a multi-lock's names and their tokens
	// (MultiLock.Names, Tokens); Name and Token are then MultiLock.Name
	// and Token.
	Names  []string `json:"names,omitempty"`
	Tokens []int64  `json:"tokens,omitempty"`
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
	if (r.Kind != "start" && r.Kind != "end") || r.Hold <= 0 || r.Pid <= 0 || r.Name == "" || r.At <= 0 ||
		len(r.Names) != len(r.Tokens) || r.Slot < 0 {
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
	// Slot, Write, Names and Tokens are the start record's: see record.
	Slot   int
	Write  bool
	Names  []string
	Tokens []int64
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
		iv := interval{Name: s.Name, Token: s.Token, Start: s.At, Pid: s.Pid, Slot: s.Slot, Write: s.Write, Names: s.Names, Tokens: s.Tokens}
		e, ended := ends[k]
		switch {
		case ended:
			delete(ends, k)
			if e.Name != s.Name || e.Token != s.Token || e.Slot != s.Slot || e.Write != s.Write {
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

// check proves the intervals consistent, name by name, each as its kind
// promises (kindOf): a multi-lock's hold counts as a hold of each of its
// names, with that name's token, so that it is checked against every other
// hold of the name, by multi-locks or plain locks; semaphores, see
// checkSemaphore, and forupdate's see checkDistinctTokens too; read/write
// locks, rowlock's and forupdate's, see checkRW; every other kind is a
// mutex, see checkExclusive.
func check(ivs []interval) []error {
	byName := map[string][]interval{}
	for _, iv := range ivs {
		for _, m := range members(iv) {
			byName[m.Name] = append(byName[m.Name], m)
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		es := byName[name]
		sortByStart(es)
		switch kindOf(name) {
		case kindSemaphore:
			errs = append(errs, checkSemaphore(name, es)...)
		case kindFUSemaphore:
			errs = append(errs, checkSemaphore(name, es)...)
			errs = append(errs, checkDistinctTokens(name, es)...)
		case kindRW, kindFURW:
			errs = append(errs, checkRW(name, es)...)
		default:
			errs = append(errs, checkExclusive(name, es)...)
		}
	}
	return errs
}

// members are the holds a hold stands for: one per name of a multi-lock,
// each with its own token; the hold itself otherwise.
func members(iv interval) []interval {
	if len(iv.Names) == 0 {
		return []interval{iv}
	}
	out := make([]interval, len(iv.Names))
	for i, name := range iv.Names {
		m := iv
		m.Name, m.Token, m.Names, m.Tokens = name, iv.Tokens[i], nil, nil
		out[i] = m
	}
	return out
}

// sortByStart orders holds as they began, tokens breaking ties.
func sortByStart(es []interval) {
	sort.Slice(es, func(i, j int) bool {
		if es[i].Start != es[j].Start {
			return es[i].Start < es[j].Start
		}
		return es[i].Token < es[j].Token
	})
}

// checkExclusive proves the holds of a mutex (es, sorted by start; what
// names it in errors) consistent: no hold begins before every
// earlier-starting one has ended, and tokens strictly grow in the order
// the holds began.
func checkExclusive(what string, es []interval) []error {
	var errs []error
	latest := es[0] // the interval that ends last among those seen
	for i := 1; i < len(es); i++ {
		prev, cur := es[i-1], es[i]
		if cur.Start <= latest.End {
			errs = append(errs, fmt.Errorf("%s: holds overlap: token %d (pid %d) believed [%d, %d]%s, token %d (pid %d) from %d",
				what, latest.Token, latest.Pid, latest.Start, latest.End, openNote(latest), cur.Token, cur.Pid, cur.Start))
		}
		if cur.Token <= prev.Token {
			errs = append(errs, fmt.Errorf("%s: token %d (pid %d, from %d) after token %d (pid %d, from %d): did not grow",
				what, cur.Token, cur.Pid, cur.Start, prev.Token, prev.Pid, prev.Start))
		}
		if cur.End > latest.End {
			latest = cur
		}
	}
	return errs
}

// checkSemaphore proves the permits of a semaphore of semLimit (es, sorted
// by start) consistent: never more than semLimit holders at once, and each
// slot (Permit.Slot, below the limit) a mutex of its own, tokens included.
func checkSemaphore(name string, es []interval) []error {
	var errs []error
	bySlot := map[int][]interval{}
	for _, iv := range es {
		if iv.Slot >= semLimit {
			errs = append(errs, fmt.Errorf("%s: token %d (pid %d, from %d) in slot %d, beyond the limit %d",
				name, iv.Token, iv.Pid, iv.Start, iv.Slot, semLimit))
		}
		bySlot[iv.Slot] = append(bySlot[iv.Slot], iv)
	}
	slots := make([]int, 0, len(bySlot))
	for slot := range bySlot {
		slots = append(slots, slot)
	}
	sort.Ints(slots)
	for _, slot := range slots {
		errs = append(errs, checkExclusive(fmt.Sprintf("%s slot %d", name, slot), bySlot[slot])...)
	}
	_, over := holdersAtOnce(es, semLimit)
	for _, at := range over {
		errs = append(errs, fmt.Errorf("%s: %d holders at %d, more than the limit %d", name, semLimit+1, at, semLimit))
	}
	return errs
}

// checkDistinctTokens proves that no two holds of a forupdate semaphore's
// permits (es) have one token, whatever their slots: forupdate draws a
// permit's token from its counter once the slot is locked, so a permit's
// is above that of every permit released before it was taken and differs
// from those held at the same time. (A rowlock permit's token is its
// slot's: permits of two slots may share one.)
func checkDistinctTokens(name string, es []interval) []error {
	var errs []error
	first := map[int64]interval{}
	for _, iv := range es {
		if other, seen := first[iv.Token]; seen {
			errs = append(errs, fmt.Errorf("%s: token %d twice: slot %d (pid %d, from %d) and slot %d (pid %d, from %d)",
				name, iv.Token, other.Slot, other.Pid, other.Start, iv.Slot, iv.Pid, iv.Start))
			continue
		}
		first[iv.Token] = iv
	}
	return errs
}

// holdersAtOnce sweeps over the holds' starts and ends (at equal times
// starts first, since intervals are closed) and returns the most holders
// at once, and the times at which their number rose above limit.
func holdersAtOnce(es []interval, limit int) (peak int, over []int64) {
	type event struct {
		at    int64
		delta int
	}
	events := make([]event, 0, 2*len(es))
	for _, iv := range es {
		events = append(events, event{iv.Start, 1}, event{iv.End, -1})
	}
	sort.Slice(events, func(i, j int) bool {
		if events[i].at != events[j].at {
			return events[i].at < events[j].at
		}
		return events[i].delta > events[j].delta
	})
	holders := 0
	for _, ev := range events {
		holders += ev.delta
		peak = max(peak, holders)
		if ev.delta > 0 && holders == limit+1 {
			over = append(over, ev.at)
		}
	}
	return peak, over
}

// checkRW proves the holds of a read/write lock (es, sorted by start)
// consistent: a write hold overlaps no other hold, read or write; a
// writer's token is above the token of every hold that began before it; a
// reader's token is at least that of every writer that began before it
// (readers share the last writer's).
func checkRW(name string, es []interval) []error {
	var errs []error
	var latest, latestWriter *interval // the holds seen that end last
	var maxToken, maxWriterToken int64 // over the holds that began strictly before
	var groupMax, groupWriterMax int64 // over those that began at the current start
	for i := range es {
		cur := &es[i]
		if i > 0 && cur.Start != es[i-1].Start {
			maxToken, maxWriterToken = max(maxToken, groupMax), max(maxWriterToken, groupWriterMax)
			groupMax, groupWriterMax = 0, 0
		}
		switch {
		case cur.Write && latest != nil && cur.Start <= latest.End:
			errs = append(errs, fmt.Errorf("%s: a writer with another holder: %s believed [%d, %d]%s, writer token %d (pid %d) from %d",
				name, mode(*latest), latest.Start, latest.End, openNote(*latest), cur.Token, cur.Pid, cur.Start))
		case !cur.Write && latestWriter != nil && cur.Start <= latestWriter.End:
			errs = append(errs, fmt.Errorf("%s: a writer with another holder: writer token %d (pid %d) believed [%d, %d]%s, reader token %d (pid %d) from %d",
				name, latestWriter.Token, latestWriter.Pid, latestWriter.Start, latestWriter.End, openNote(*latestWriter), cur.Token, cur.Pid, cur.Start))
		}
		switch {
		case cur.Write && cur.Token <= maxToken:
			errs = append(errs, fmt.Errorf("%s: writer token %d (pid %d, from %d) not above %d, a token of a hold that began before it",
				name, cur.Token, cur.Pid, cur.Start, maxToken))
		case !cur.Write && cur.Token < maxWriterToken:
			errs = append(errs, fmt.Errorf("%s: reader token %d (pid %d, from %d) below %d, the token of a writer that began before it",
				name, cur.Token, cur.Pid, cur.Start, maxWriterToken))
		}
		groupMax = max(groupMax, cur.Token)
		if cur.Write {
			groupWriterMax = max(groupWriterMax, cur.Token)
			if latestWriter == nil || cur.End > latestWriter.End {
				latestWriter = cur
			}
		}
		if latest == nil || cur.End > latest.End {
			latest = cur
		}
	}
	return errs
}

// mode describes a read/write lock's hold for errors.
func mode(iv interval) string {
	m := "reader"
	if iv.Write {
		m = "writer"
	}
	return fmt.Sprintf("%s token %d (pid %d)", m, iv.Token, iv.Pid)
}

func openNote(iv interval) string {
	if iv.Open {
		return " (no end record: held until its SIGKILL)"
	}
	return ""
}
