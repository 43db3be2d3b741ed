package torture_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

func TestMain(m *testing.M) {
	testdb.Main(m)
}

const (
	workers        = 4 // worker processes alive at any time, per dialect
	perWorker      = 3 // goroutines taking locks in each
	tortureTTL     = time.Second
	acquireTimeout = 10 * tortureTTL
)

// slotOffsets are the wall-clock offsets of the worker slots: two workers
// run an hour off, one ahead and one behind; a worker that replaces a
// killed one keeps its slot's offset.
var slotOffsets = [workers]time.Duration{time.Hour, -time.Hour, 0, 0}

// kinds of lock under torture, by name prefix: rowlock unfair and fair,
// and forupdate.
var kinds = []string{"unfair", "fair", "forupdate"}

func kindOf(name string) string {
	kind, _, _ := strings.Cut(name, "/")
	return kind
}

// runConfig sizes a run. Under -short the run is shorter, does not
// restart the server (go test -short ./... runs packages side by side), and
// asks the skewed workers for holds, but not of every kind: a few seconds
// give each only a handful.
type runConfig struct {
	length time.Duration
	short  bool
}

func TestTorture(t *testing.T) {
	cfg := runConfig{length: 24 * time.Second}
	if testing.Short() {
		cfg = runConfig{length: 8 * time.Second, short: true}
	}
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) { torture(t, tg, cfg) })
	}
}

// stopEvent is one SIGSTOP/SIGCONT of a worker, by the database clock:
// stopAt read before the SIGSTOP, contAt after the SIGCONT.
type stopEvent struct {
	pid            int
	stopAt, contAt int64
}

// run is one dialect's torture: its workers and what the fault loop did.
type run struct {
	t     *testing.T
	tg    testdb.Target
	cfg   runConfig
	proxy *testdb.Proxy
	dir   string
	names []string
	until time.Time

	procs    []*process // every worker started, in order
	live     [workers]*process
	killedAt map[int]int64 // pid -> database clock just before its SIGKILL
	stops    []stopEvent
	cuts     int
	restarts int
}

func torture(t *testing.T, tg testdb.Target, cfg runConfig) {
	r := &run{t: t, tg: tg, cfg: cfg, dir: t.TempDir(), killedAt: map[int]int64{}}
	for _, k := range kinds {
		for i := range 2 {
			r.names = append(r.names, fmt.Sprintf("%s/%s/%d", k, testdb.Name(t), i))
		}
	}
	r.proxy = testdb.NewProxy(t, tg.HostPort())
	start := time.Now()
	r.until = start.Add(cfg.length)
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range r.procs {
				t.Log(p.output())
			}
		}
	})
	for slot := range r.live {
		r.spawn(slot)
	}
	r.faults(start)

	for _, p := range r.live {
		select {
		case <-p.done:
		case <-time.After(cfg.length + 2*time.Minute):
			t.Fatalf("worker pid %d did not finish", p.pid)
		}
	}
	var recs []record
	for _, p := range r.procs {
		if !p.wasKilled() {
			if _, errs := p.verify(); len(errs) > 0 {
				for _, err := range errs {
					t.Error(err)
				}
			}
		}
		pr, err := readLedger(p.ledger, p.wasKilled())
		if err != nil {
			t.Error(err)
		}
		recs = append(recs, pr...)
	}
	ivs, errs := intervals(recs, r.killedAt)
	errs = append(errs, check(ivs)...)
	for _, err := range errs {
		t.Error(err)
	}
	r.checkExercised(ivs)
	r.checkAcquirable()
	summary := r.summary(ivs)
	t.Log(summary)
	fmt.Println(summary)
}

// spawn starts a worker in slot, for the rest of the run.
func (r *run) spawn(slot int) {
	n := len(r.procs) + 1
	p := startWorker(r.t, slot, slotOffsets[slot],
		filepath.Join(r.dir, fmt.Sprintf("worker-%d.jsonl", n)),
		filepath.Join(r.dir, fmt.Sprintf("worker-%d.log", n)),
		max(time.Until(r.until), 0),
		[]string{
			envDialect + "=" + r.tg.Name,
			envDSN + "=" + r.tg.DSNVia(r.proxy.Addr()),
			envClockDSN + "=" + r.tg.DSN,
			envNames + "=" + strings.Join(r.names, ","),
		})
	r.procs = append(r.procs, p)
	r.live[slot] = p
}

// faults runs the fault loop until two seconds before the end, and until
// each kind of fault has happened at least once: SIGKILL of a worker,
// SIGSTOP and SIGCONT of a worker (a holder paused past its lease, as by a
// long GC pause), a cut of every connection through the proxy, and (not
// under -short) one restart of the server, half way through.
func (r *run) faults(start time.Time) {
	t := r.t
	pending := []string{"kill", "stop", "cut"}
	rand.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
	restartAt := start.Add(r.cfg.length / 2)
	end := r.until.Add(-2 * time.Second)
	for time.Now().Before(end) || len(pending) > 0 || (!r.cfg.short && r.restarts == 0) {
		// Long enough for a worker woken by SIGCONT to record that it lost
		// its holds before anything else happens to it.
		time.Sleep(time.Duration(400+rand.IntN(600)) * time.Millisecond)
		if !r.cfg.short && r.restarts == 0 && time.Now().After(restartAt) {
			restartServer(t, r.tg)
			r.restarts++
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
		slot := running[rand.IntN(len(running))]
		kind := []string{"kill", "stop", "cut"}[rand.IntN(3)]
		if len(pending) > 0 {
			kind, pending = pending[0], pending[1:]
		}
		switch kind {
		case "kill":
			p := r.live[slot]
			// Read before the signal: a forupdate successor gets the row the
			// moment the connection dies, so a reading after could be later
			// than its start though the killed holder was gone by then.
			at := r.dbNow()
			if !p.kill() {
				pending = append(pending, kind) // it had just ended: try another
				continue
			}
			r.killedAt[p.pid] = at
			r.spawn(slot)
		case "stop":
			p := r.live[slot]
			ev := stopEvent{pid: p.pid, stopAt: r.dbNow()}
			if err := p.signal(syscall.SIGSTOP); err != nil {
				pending = append(pending, kind) // it had just ended: try another
				continue
			}
			time.Sleep(tortureTTL*3/2 + time.Duration(rand.Int64N(int64(tortureTTL))))
			if err := p.signal(syscall.SIGCONT); err != nil {
				t.Fatalf("SIGCONT pid %d: %v", p.pid, err)
			}
			ev.contAt = r.dbNow()
			r.stops = append(r.stops, ev)
		case "cut":
			r.proxy.Cut()
			time.Sleep(time.Duration(200+rand.IntN(600)) * time.Millisecond)
			r.proxy.Restore()
			r.cuts++
		}
	}
}

// dbNow reads the database clock straight from the server, retrying for
// a while; it fails the test when the server does not answer for 30 s.
func (r *run) dbNow() int64 {
	var err error
	for range 300 {
		var us int64
		if us, err = dbNow(r.tg.DB, r.tg.Dialect); err == nil {
			return us
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.t.Fatalf("reading the %s clock: %v", r.tg.Name, err)
	return 0
}

// checkExercised fails a run that proved less than it claims: every fault
// happened, every name was held, and the skewed workers held every kind.
func (r *run) checkExercised(ivs []interval) {
	t := r.t
	if len(r.killedAt) == 0 || len(r.stops) == 0 || r.cuts == 0 {
		t.Errorf("faults: %d SIGKILLs, %d SIGSTOPs, %d cuts: want each > 0", len(r.killedAt), len(r.stops), r.cuts)
	}
	if want := map[bool]int{false: 1, true: 0}[r.cfg.short]; r.restarts != want {
		t.Errorf("%d server restarts, want %d", r.restarts, want)
	}
	perName := map[string]int{}
	offsetOf := r.offsets()
	type offsetKind struct {
		offset time.Duration
		kind   string
	}
	skewed := map[offsetKind]int{}
	for _, iv := range ivs {
		perName[iv.Name]++
		kind := kindOf(iv.Name)
		if r.cfg.short {
			kind = "any"
		}
		skewed[offsetKind{offsetOf[iv.Pid], kind}]++
	}
	for _, name := range r.names {
		if perName[name] == 0 {
			t.Errorf("%s was never held: the torture exercised nothing", name)
		}
	}
	for _, offset := range slotOffsets {
		if offset == 0 {
			continue
		}
		want := kinds
		if r.cfg.short {
			want = []string{"any"}
		}
		for _, kind := range want {
			if skewed[offsetKind{offset, kind}] == 0 {
				t.Errorf("workers whose clock is off by %v recorded no hold (kind %s): skew went untested", offset, kind)
			}
		}
	}
}

func (r *run) offsets() map[int]time.Duration {
	m := map[int]time.Duration{}
	for _, p := range r.procs {
		m[p.pid] = p.offset
	}
	return m
}

// checkAcquirable proves every lock can be had again once the dust
// settles: fair names through the fair queue, so that a waiter queue stuck
// on a dead waiter is caught too.
func (r *run) checkAcquirable() {
	t := r.t
	rl, err := rowlock.New(r.tg.DB)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rl.Close() }()
	fl, err := forupdate.New(r.tg.DB)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	for _, name := range r.names {
		var l dblock.Locker = rl
		opts := []dblock.Option{dblock.TTL(tortureTTL)}
		switch kindOf(name) {
		case "fair":
			opts = append(opts, dblock.Fair())
		case "forupdate":
			l = fl
		}
		// Generous: a liveness bound, not a timing claim.
		ctx, cancel := context.WithTimeout(t.Context(), 30*tortureTTL)
		k, err := l.Acquire(ctx, name, opts...)
		cancel()
		if err != nil {
			t.Errorf("%s not acquirable after the torture: %v", name, err)
			continue
		}
		if err := k.Release(t.Context()); err != nil {
			t.Errorf("%s: release after the torture: %v", name, err)
		}
	}
}

// summary is the line that says what the run survived.
func (r *run) summary(ivs []interval) string {
	type stats struct{ holds, long, lost, open, acrossStop int }
	perKind := map[string]*stats{}
	for _, k := range kinds {
		perKind[k] = &stats{}
	}
	offsetOf := r.offsets()
	perOffset := map[time.Duration]int{}
	for _, iv := range ivs {
		s := perKind[kindOf(iv.Name)]
		s.holds++
		if iv.End-iv.Start > tortureTTL.Microseconds() {
			s.long++
		}
		if iv.Lost {
			s.lost++
		}
		if iv.Open {
			s.open++
		}
		// Held from before a SIGSTOP of its process to after the SIGCONT.
		if slices.ContainsFunc(r.stops, func(ev stopEvent) bool {
			return ev.pid == iv.Pid && iv.Start <= ev.stopAt && iv.Ended >= ev.contAt
		}) {
			s.acrossStop++
		}
		perOffset[offsetOf[iv.Pid]]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "torture %s: %d acquisitions checked over %d names by %d worker processes (clock +1h: %d holds, -1h: %d)",
		r.tg.Name, len(ivs), len(r.names), len(r.procs), perOffset[time.Hour], perOffset[-time.Hour])
	for _, k := range kinds {
		s := perKind[k]
		fmt.Fprintf(&b, "; %s: %d holds, %d past the TTL, %d ended by a lost lock, %d cut off by SIGKILL, %d held across a SIGSTOP",
			k, s.holds, s.long, s.lost, s.open, s.acrossStop)
	}
	fmt.Fprintf(&b, "; survived %d SIGKILLs, %d SIGSTOPs, %d connection cuts, %d server restarts",
		len(r.killedAt), len(r.stops), r.cuts, r.restarts)
	switch {
	case r.cfg.short:
		b.WriteString(" (restart skipped under -short)")
	case restartIsNoop(r.tg):
		fmt.Fprintf(&b, " (no-op: %s=true)", restartEnv(r.tg))
	}
	return b.String()
}

func restartEnv(tg testdb.Target) string {
	return "SQLLOCK_TORTURE_RESTART_" + strings.ToUpper(tg.Name)
}

// restartIsNoop reports whether the restart command is `true`, which
// developers use to run the suite beside other tests.
func restartIsNoop(tg testdb.Target) bool {
	return strings.TrimSpace(os.Getenv(restartEnv(tg))) == "true"
}

// restartServer restarts a database server and waits until it answers.
func restartServer(t *testing.T, tg testdb.Target) {
	t.Helper()
	cmd := map[dblock.Dialect]string{
		dblock.Postgres: `pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n1)" main restart`,
		dblock.MySQL: `mysqladmin -h127.0.0.1 -uroot shutdown && ` +
			`for i in $(seq 100); do pgrep -x mariadbd >/dev/null || break; sleep 0.1; done; ` +
			`start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`,
	}[tg.Dialect]
	if v := os.Getenv(restartEnv(tg)); v != "" {
		cmd = v
	}
	if out, err := exec.Command("bash", "-c", cmd).CombinedOutput(); err != nil {
		t.Fatalf("restart %s: %v\n%s", tg.Name, err, out)
	}
	for range 600 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := tg.DB.PingContext(ctx)
		cancel()
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not come back within a minute of its restart", tg.Name)
}
