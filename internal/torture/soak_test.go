package torture_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sqllock/sqllock/internal/testdb"
)

var (
	soakFor = flag.Duration("soak", 0,
		"TestSoak: how long to torture each database, e.g. 10m; 0 (the default) runs nothing")
	soakMin = flag.Int("soak-min", 100_000,
		"TestSoak: the fewest ledger-checked acquisitions each database must reach")
)

// soakRestartEvery is how often a soak restarts the server.
const soakRestartEvery = 2 * time.Minute

// soakFaultGap is the range of pauses between a soak's faults: longer
// than TestTorture's, so that the server is read-only a seventh of the
// time rather than a third, and the workers get more done between faults.
var soakFaultGap = durationRange{time.Second, 3 * time.Second}

// TestSoak is the torture suite run long, outside CI: the same workers,
// ledger checks and faults, continuously for -soak on each database, with
// more names, more goroutines, briefer holds and a server restart every
// soakRestartEvery (at least two), and it fails unless each database saw -soak-min
// ledger-checked acquisitions. Without -soak it runs nothing, and says so:
// its PASS then proves nothing.
//
//	go test ./internal/torture -run TestSoak -soak 10m -timeout 0 -v
func TestSoak(t *testing.T) {
	if *soakFor <= 0 {
		t.Log("TestSoak ran nothing and proves nothing: give -soak DURATION (see CONTRIBUTING.md, Torture and soak)")
		return
	}
	targets := testdb.Targets(t)
	// Each database's run, then its workers' end, checks and cleanup.
	need := time.Duration(len(targets)) * (*soakFor + 5*time.Minute)
	if dl, ok := t.Deadline(); ok && time.Until(dl) < need {
		t.Fatalf("-soak %v on %d databases needs about %v, more than -timeout leaves: add -timeout 0", *soakFor, len(targets), need)
	}
	cfg := runConfig{
		length:        *soakFor,
		namesPerKind:  16,
		goroutines:    20,
		profile:       "soak",
		restartEvery:  min(soakRestartEvery, *soakFor/2),
		progressEvery: time.Minute,
		faultGap:      soakFaultGap,
	}
	for _, tg := range targets {
		t.Run(tg.Name, func(t *testing.T) {
			if n := len(torture(t, tg, cfg)); n < *soakMin {
				t.Errorf("%d ledger-checked acquisitions, want at least %d (-soak-min): soak longer", n, *soakMin)
			}
		})
	}
}

// progress logs how far a long run got: acquisitions recorded so far (the
// start records in the ledgers) and faults injected.
func (r *run) progress() {
	n := 0
	for _, p := range r.procs {
		data, err := os.ReadFile(p.ledger)
		if err != nil {
			r.t.Errorf("reading %s: %v", p.ledger, err)
			continue
		}
		n += bytes.Count(data, []byte(`"kind":"start"`))
	}
	c := r.counts
	pooler := ""
	if r.bouncer.DSN != "" {
		pooler = fmt.Sprintf(", %d PgBouncer crashes", c.poolerCrashes)
	}
	r.t.Logf("%s: %v of %v, %d acquisitions so far; %d SIGKILLs, %d SIGSTOPs, %d cuts, %d restarts, %d session-kill rounds, %d read-only switches%s",
		r.tg.Name, time.Since(r.started).Round(time.Second), r.cfg.length, n,
		len(r.killedAt), len(r.stops), c.cuts, c.restarts, c.sessionKills, c.readOnly, pooler)
}
