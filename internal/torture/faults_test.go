package torture_test

import (
	"math/rand/v2"
	"slices"
	"syscall"
	"time"

	"github.com/sqllock/sqllock/internal/testdb"
)

// Kinds of fault the loop injects, besides server restarts.
const (
	faultKill        = "SIGKILL"      // a worker, which gets no chance to release anything
	faultStop        = "SIGSTOP"      // a worker paused past its lease, as by a long GC pause
	faultCut         = "cut"          // every connection through the proxies
	faultSessionKill = "session kill" // worker sessions killed by the server
	faultReadOnly    = "read-only"    // the server refuses writes for a while
)

var faultKinds = []string{faultKill, faultStop, faultCut, faultSessionKill, faultReadOnly}

// kindsFor are the faults of a run: under -short, not the read-only
// switch, which would refuse the writes of the other packages' tests that
// go test -short ./... runs beside it.
func kindsFor(cfg runConfig) []string {
	if cfg.short {
		return slices.DeleteFunc(slices.Clone(faultKinds), func(k string) bool { return k == faultReadOnly })
	}
	return faultKinds
}

// faultCounts is what the fault loop did, besides SIGKILLs and SIGSTOPs
// (run.killedAt, run.stops).
type faultCounts struct {
	cuts     int
	restarts int
	// sessionKills rounds killed sessionsKilled sessions, of which
	// markerSessionsKilled held the session marker of a held lock.
	sessionKills, sessionsKilled, markerSessionsKilled int
	readOnly                                           int
	readOnlyFor                                        time.Duration
	// poolerCrashes counts the times PgBouncer died and was started again.
	poolerCrashes int
}

// faults runs the fault loop until two seconds before the end, and until
// each kind of fault has happened at least once (a session kill: one that
// hit a held lock's session marker), restarting the server half way
// through or every cfg.restartEvery (never under -short).
func (r *run) faults() {
	t := r.t
	kinds := kindsFor(r.cfg)
	pending := slices.Clone(kinds)
	rand.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
	nextRestart := r.started.Add(r.cfg.length / 2)
	if r.cfg.restartEvery > 0 {
		nextRestart = r.started.Add(r.cfg.restartEvery)
	}
	nextProgress := r.started.Add(r.cfg.progressEvery)
	end := r.until.Add(-2 * time.Second)
	restartDue := func() bool {
		return !r.cfg.short && time.Now().After(nextRestart) && (r.cfg.restartEvery > 0 || r.counts.restarts == 0)
	}
	happened := map[string]bool{}
	for time.Now().Before(end) || len(pending) > 0 || (!r.cfg.short && r.counts.restarts == 0) {
		time.Sleep(r.cfg.faultGap.min + rand.N(r.cfg.faultGap.max-r.cfg.faultGap.min))
		if r.cfg.progressEvery > 0 && time.Now().After(nextProgress) {
			nextProgress = nextProgress.Add(r.cfg.progressEvery)
			r.progress()
		}
		r.keepPoolerUp()
		if restartDue() {
			restartServer(t, r.tg)
			r.counts.restarts++
			nextRestart = nextRestart.Add(r.cfg.restartEvery)
			continue
		}
		var running []int
		for slot, p := range r.live {
			if p.running() {
				running = append(running, slot)
			}
		}
		if len(running) == 0 {
			break // checkExercised reports any fault that did not happen
		}
		kind := kinds[rand.IntN(len(kinds))]
		if len(pending) > 0 {
			kind, pending = pending[0], pending[1:]
		}
		switch {
		case r.inject(kind, running[rand.IntN(len(running))]):
			happened[kind] = true
		case !happened[kind]:
			pending = append(pending, kind) // it could not happen now: again later
		}
	}
}

// inject runs one fault (on the worker in slot, for the faults that hit
// one) and reports whether it happened.
func (r *run) inject(kind string, slot int) bool {
	t := r.t
	switch kind {
	case faultKill:
		p := r.live[slot]
		// Read before the signal: a forupdate successor gets the row the
		// moment the connection dies, so a reading after could be later
		// than its start though the killed holder was gone by then.
		at := r.dbNow()
		if !p.kill() {
			return false // it had just ended
		}
		r.killedAt[p.pid] = at
		r.spawn(slot)
	case faultStop:
		p := r.live[slot]
		ev := stopEvent{pid: p.pid, stopAt: r.dbNow()}
		if err := p.signal(syscall.SIGSTOP); err != nil {
			return false // it had just ended
		}
		time.Sleep(tortureTTL*3/2 + time.Duration(rand.Int64N(int64(tortureTTL))))
		if err := p.signal(syscall.SIGCONT); err != nil {
			t.Fatalf("SIGCONT pid %d: %v", p.pid, err)
		}
		ev.contAt = r.dbNow()
		r.stops = append(r.stops, ev)
	case faultCut:
		r.cut(true)
		time.Sleep(time.Duration(200+rand.IntN(600)) * time.Millisecond)
		r.cut(false)
		r.counts.cuts++
	case faultSessionKill:
		killed, markers := r.server.killSessions()
		r.counts.sessionKills++
		r.counts.sessionsKilled += killed
		r.counts.markerSessionsKilled += markers
		return markers > 0
	case faultReadOnly:
		// Past the lease, so that holders lose locks whose renewals the
		// server refuses, and fair waiters' heartbeats are refused too.
		d := tortureTTL*3/2 + time.Duration(rand.Int64N(int64(tortureTTL)))
		r.server.setReadOnly(true)
		time.Sleep(d)
		r.server.setReadOnly(false)
		r.counts.readOnly++
		r.counts.readOnlyFor += d
	}
	return true
}

// cut cuts (or restores) every connection through the proxies.
func (r *run) cut(on bool) {
	proxies := []*testdb.Proxy{r.proxy}
	if r.poolProxy != nil {
		proxies = append(proxies, r.poolProxy)
	}
	for _, p := range proxies {
		if on {
			p.Cut()
		} else {
			p.Restore()
		}
	}
}
