package torture_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// entry is one hold as its holder saw it: the database-clock interval
// [Start, End] (µs since the epoch) in which it believed it held Name with
// Token. Start is read after Acquire returned; End is read while the holder
// still believed (its Lock.Err was nil after reading it). A holder that
// stopped believing before End records End = Start.
type entry struct {
	Name  string `json:"name"`
	Token int64  `json:"token"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
	Pid   int    `json:"pid"`
}

// ledger appends entries to a file, one JSON line per write(2), so a
// SIGKILL loses at most the line being written.
type ledger struct{ f *os.File }

func openLedger(path string) (*ledger, error) {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	return &ledger{f}, err
}

func (l *ledger) add(e entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = l.f.Write(append(b, '\n'))
	return err
}

// readLedgers reads every *.jsonl file in dir; a torn last line (the writer
// was killed mid-write) is skipped.
func readLedgers(dir string) ([]entry, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	var out []entry
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var e entry
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				out = append(out, e)
			}
		}
		_ = f.Close()
	}
	return out, nil
}

// check proves the ledger consistent: per name, ordered by start, every
// interval ends before the next begins and tokens strictly grow.
func check(entries []entry) []error {
	byName := map[string][]entry{}
	for _, e := range entries {
		byName[e.Name] = append(byName[e.Name], e)
	}
	var errs []error
	for name, es := range byName {
		sort.Slice(es, func(i, j int) bool { return es[i].Start < es[j].Start })
		for i := 1; i < len(es); i++ {
			prev, cur := es[i-1], es[i]
			if cur.Start <= prev.End {
				errs = append(errs, fmt.Errorf("%s: holds overlap: token %d (pid %d) believed [%d, %d], token %d (pid %d) from %d",
					name, prev.Token, prev.Pid, prev.Start, prev.End, cur.Token, cur.Pid, cur.Start))
			}
			if cur.Token <= prev.Token {
				errs = append(errs, fmt.Errorf("%s: token %d (pid %d) after token %d (pid %d): did not grow", name, cur.Token, cur.Pid, prev.Token, prev.Pid))
			}
		}
	}
	return errs
}
