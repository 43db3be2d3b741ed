package torture_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	tortureTTL     = time.Second
	acquireTimeout = 10 * tortureTTL
)

// path is how a worker reaches the database server.
type path string

const (
	// direct: through the fault-injection proxy to the server.
	direct path = "direct"
	// pooled: through the proxy to PgBouncer in transaction mode, the
	// session connection from the same pool (rowlock detects the pooler
	// and goes without markers and LISTEN).
	pooled path = "pgbouncer"
	// pooledSession: as pooled, with rowlock.WithSessionDB on a direct
	// connection (through the proxy), so markers and LISTEN work.
	pooledSession path = "pgbouncer+session"
)

// slot is one worker place: a worker that replaces a killed one keeps its
// slot's clock offset and path.
type slot struct {
	offset time.Duration
	path   path
}

// slotsFor lays out the workers of a dialect: two run with their wall
// clock an hour off, one ahead and one behind; on PostgreSQL two more go
// through PgBouncer, one of them with a direct session connection.
func slotsFor(d dblock.Dialect) []slot {
	s := []slot{{time.Hour, direct}, {-time.Hour, direct}, {0, direct}, {0, direct}}
	if d == dblock.Postgres {
		s[3].path = pooled
		s = append(s, slot{0, pooledSession})
	}
	return s
}

// Kinds of lock under torture, by name prefix: rowlock mutexes unfair
// and fair, forupdate, rowlock semaphores of semLimit permits, read/write
// locks, and multi-locks (sets of the multi names taken with AcquireAll,
// and those names alone), and forupdate's semaphores of semLimit permits
// and read/write locks. The workers pick names at random, so the kinds
// share the run's time.
const (
	kindUnfair      = "unfair"
	kindFair        = "fair"
	kindForUpdate   = "forupdate"
	kindSemaphore   = "semaphore"
	kindRW          = "rw"
	kindMulti       = "multi"
	kindFUSemaphore = "forupdate-semaphore"
	kindFURW        = "forupdate-rw"
)

var kinds = []string{kindUnfair, kindFair, kindForUpdate, kindSemaphore, kindRW, kindMulti, kindFUSemaphore, kindFURW}

// semLimit is the permits of the torture's semaphores: fewer than the
// goroutines of a run, so that they contend.
const semLimit = 3

// minMultiNames is the fewest multi names of a run, so that AcquireAll
// sets overlap in more ways than one.
const minMultiNames = 3

func kindOf(name string) string {
	kind, _, _ := strings.Cut(name, "/")
	return kind
}

// runConfig sizes a run. Under -short the run is shorter, does not
// restart the server nor switch it read-only (go test -short ./... runs
// packages side by side), and asks the skewed and pooled workers for
// holds, but not of every kind: a few seconds give each only a handful.
type runConfig struct {
	length       time.Duration
	short        bool
	namesPerKind int
	goroutines   int         // per worker
	profile      holdProfile // how long holds last
	// restartEvery is how often the server restarts; 0 is once, half way
	// through (never under -short).
	restartEvery time.Duration
	// progressEvery is how often a long run logs how far it got; 0 never.
	progressEvery time.Duration
	// faultGap is the range of pauses between faults.
	faultGap durationRange
}

type durationRange struct{ min, max time.Duration }

// tortureFaultGap is the range of pauses between faults of TestTorture:
// long enough for a worker woken by SIGCONT to record that it lost its
// holds before anything else happens to it.
var tortureFaultGap = durationRange{400 * time.Millisecond, time.Second}

func TestTorture(t *testing.T) {
	cfg := runConfig{length: 24 * time.Second, namesPerKind: 2, goroutines: 3, profile: "torture", faultGap: tortureFaultGap}
	if testing.Short() {
		cfg.length, cfg.short = 8*time.Second, true
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
	t      *testing.T
	tg     testdb.Target
	cfg    runConfig
	slots  []slot
	server *server // what the suite does to the server itself
	proxy  *testdb.Proxy
	// poolProxy is in front of PgBouncer (PostgreSQL only), cut with proxy.
	poolProxy *testdb.Proxy
	bouncer   testdb.Target // PgBouncer's DSN, as a Target for DSNVia
	dir       string
	names     []string
	started   time.Time
	until     time.Time

	procs    []*process    // every worker started, in order
	live     []*process    // by slot
	killedAt map[int]int64 // pid -> database clock just before its SIGKILL
	stops    []stopEvent
	counts   faultCounts
}

// torture runs one dialect's torture and returns the holds it checked.
func torture(t *testing.T, tg testdb.Target, cfg runConfig) []interval {
	r := &run{t: t, tg: tg, cfg: cfg, slots: slotsFor(tg.Dialect), dir: t.TempDir(), killedAt: map[int]int64{}}
	r.live = make([]*process, len(r.slots))
	for _, k := range kinds {
		n := cfg.namesPerKind
		switch k {
		case kindMulti:
			n = max(n, minMultiNames)
		case kindSemaphore, kindFUSemaphore:
			// Half as many, so that their holders reach the limit.
			n = max(1, n/2)
		}
		for i := range n {
			r.names = append(r.names, fmt.Sprintf("%s/%s/%d", k, testdb.Name(t), i))
		}
	}
	r.server = newServer(t, tg, r.names)
	r.proxy = testdb.NewProxy(t, tg.HostPort())
	if tg.Dialect == dblock.Postgres {
		r.bouncer = pgBouncer(t, tg)
		r.poolProxy = testdb.NewProxy(t, r.bouncer.HostPort())
	}
	r.started = time.Now()
	r.until = r.started.Add(cfg.length)
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
	r.faults()

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
	r.keepPoolerUp() // for the tests after this one
	r.checkExercised(ivs)
	r.checkAcquirable()
	summary := r.summary(ivs, len(errs))
	t.Log(summary)
	fmt.Println(summary)
	return ivs
}

// spawn starts a worker in slot, for the rest of the run.
func (r *run) spawn(slot int) {
	n := len(r.procs) + 1
	sl := r.slots[slot]
	env := []string{
		envDialect + "=" + r.tg.Name,
		envClockDSN + "=" + r.server.workerDSN(r.tg.DSN),
		envNames + "=" + strings.Join(r.names, ","),
		envPerWorker + "=" + strconv.Itoa(r.cfg.goroutines),
		envProfile + "=" + string(r.cfg.profile),
	}
	viaProxy := r.server.workerDSN(r.tg.DSNVia(r.proxy.Addr()))
	switch sl.path {
	case direct:
		env = append(env, envDSN+"="+viaProxy)
	case pooled, pooledSession:
		// The DSN as a user would write it: sqllock picks, statement by
		// statement, what works through a pooler.
		env = append(env, envDSN+"="+r.server.workerDSN(r.bouncer.DSNVia(r.poolProxy.Addr())))
		if sl.path == pooledSession {
			env = append(env, envSessionDSN+"="+viaProxy)
		}
	}
	p := startWorker(r.t, slot, sl.offset,
		filepath.Join(r.dir, fmt.Sprintf("worker-%d.jsonl", n)),
		filepath.Join(r.dir, fmt.Sprintf("worker-%d.log", n)),
		max(time.Until(r.until), 0), env)
	r.procs = append(r.procs, p)
	r.live[slot] = p
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
// happened and was seen to, every name was held, and the skewed and pooled
// workers held every kind.
func (r *run) checkExercised(ivs []interval) {
	t := r.t
	c := r.counts
	if len(r.killedAt) == 0 || len(r.stops) == 0 || c.cuts == 0 {
		t.Errorf("faults: %d SIGKILLs, %d SIGSTOPs, %d cuts: want each > 0", len(r.killedAt), len(r.stops), c.cuts)
	}
	if c.markerSessionsKilled == 0 {
		t.Errorf("%d sessions killed by the server in %d rounds, none holding a held lock's session marker: crash detection went untested",
			c.sessionsKilled, c.sessionKills)
	}
	switch {
	case r.cfg.short && c.restarts != 0:
		t.Errorf("%d server restarts under -short, want 0", c.restarts)
	case !r.cfg.short && r.cfg.restartEvery == 0 && c.restarts != 1:
		t.Errorf("%d server restarts, want 1", c.restarts)
	case !r.cfg.short && r.cfg.restartEvery > 0 && c.restarts == 0:
		t.Errorf("no server restart, want one every %v", r.cfg.restartEvery)
	}
	events := r.events()
	switch {
	case r.cfg.short && c.readOnly != 0:
		t.Errorf("%d read-only switches under -short, want 0", c.readOnly)
	case !r.cfg.short && c.readOnly == 0:
		t.Errorf("no read-only switch")
	case !r.cfg.short && events[eventReadOnly]+events[eventReadOnlyLost] == 0:
		t.Errorf("no worker saw dblock.ErrReadOnly, from an acquisition or as the cause of a lost lock: the read-only switch went unnoticed")
	}
	if r.tg.Dialect == dblock.Postgres {
		if n := r.eventsOn(pooled)[eventPoolerDetected]; n == 0 {
			t.Errorf("no worker behind PgBouncer without a session connection logged that it detected the pooler")
		}
		if n := r.eventsOn(pooledSession)[eventPoolerDetected]; n > 0 {
			t.Errorf("%d workers behind PgBouncer with a direct session connection (WithSessionDB) logged a pooler in front of it", n)
		}
	}

	perName := map[string]int{}
	slotOf := r.slotOf()
	type groupKind struct {
		group, kind string
	}
	held := map[groupKind]int{}
	for _, iv := range ivs {
		for _, m := range members(iv) {
			perName[m.Name]++
		}
		kind := kindOf(iv.Name)
		if r.cfg.short {
			kind = "any"
		}
		for _, g := range groups(slotOf[iv.Pid]) {
			held[groupKind{g, kind}]++
		}
	}
	for _, name := range r.names {
		if perName[name] == 0 {
			t.Errorf("%s was never held: the torture exercised nothing", name)
		}
	}
	want := kinds
	if r.cfg.short {
		want = []string{"any"}
	}
	for _, sl := range r.slots {
		for _, g := range groups(sl) {
			for _, kind := range want {
				if held[groupKind{g, kind}] == 0 {
					t.Errorf("workers %s recorded no hold (kind %s): that went untested", g, kind)
				}
			}
		}
	}
}

// groups are what sets a slot's workers apart, for checkExercised: their
// clock offset and their path, when not the usual.
func groups(sl slot) []string {
	var g []string
	if sl.offset != 0 {
		g = append(g, fmt.Sprintf("whose clock is off by %v", sl.offset))
	}
	if sl.path != direct {
		g = append(g, fmt.Sprintf("on path %s", sl.path))
	}
	return g
}

// slotOf maps every worker's pid to its slot.
func (r *run) slotOf() map[int]slot {
	m := map[int]slot{}
	for _, p := range r.procs {
		m[p.pid] = r.slots[p.slot]
	}
	return m
}

// events counts, per event, the workers that reported it.
func (r *run) events() map[string]int {
	n := map[string]int{}
	for _, p := range r.procs {
		for e := range p.events() {
			n[e]++
		}
	}
	return n
}

// eventsOn is events for the workers on path.
func (r *run) eventsOn(pa path) map[string]int {
	n := map[string]int{}
	for _, p := range r.procs {
		if r.slots[p.slot].path == pa {
			for e := range p.events() {
				n[e]++
			}
		}
	}
	return n
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
	sem, err := rl.Semaphore(semLimit)
	if err != nil {
		t.Fatal(err)
	}
	fsem, err := fl.Semaphore(semLimit)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range r.names {
		var l dblock.Locker = rl
		opts := []dblock.Option{dblock.TTL(tortureTTL)}
		switch kindOf(name) {
		case kindFair:
			opts = append(opts, dblock.Fair())
		case kindForUpdate:
			l = fl
		case kindSemaphore:
			l = sem
		case kindRW:
			l = rl.Writers() // no reader nor writer left behind
		case kindFUSemaphore:
			l = fsem
		case kindFURW:
			l = fl.Writers()
		}
		// Every permit of a semaphore, each for an owner of its own: none
		// is left taken.
		n := 1
		if k := kindOf(name); k == kindSemaphore || k == kindFUSemaphore {
			n = semLimit
		}
		var held []dblock.Lock
		for range n {
			// Generous: a liveness bound, not a timing claim.
			ctx, cancel := context.WithTimeout(t.Context(), 30*tortureTTL)
			k, err := l.Acquire(ctx, name, opts...)
			cancel()
			if err != nil {
				t.Errorf("%s not acquirable after the torture (%d of %d held): %v", name, len(held), n, err)
				break
			}
			held = append(held, k)
		}
		for _, k := range held {
			if err := k.Release(t.Context()); err != nil {
				t.Errorf("%s: release after the torture: %v", name, err)
			}
		}
	}
	var multi []string
	for _, name := range r.names {
		if kindOf(name) == kindMulti {
			multi = append(multi, name)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*tortureTTL)
	defer cancel()
	m, err := rl.AcquireAll(ctx, multi, dblock.TTL(tortureTTL))
	if err != nil {
		t.Errorf("%v not acquirable together after the torture: %v", multi, err)
		return
	}
	if err := m.Release(t.Context()); err != nil {
		t.Errorf("%v: release after the torture: %v", multi, err)
	}
}

// kindDetail tells, for the summary, how far a kind's own invariant was
// put to the test: the most permits of a semaphore held at once (of
// semLimit), the writes among a read/write lock's holds and the most
// readers at once, the multi-lock holds of several names.
func kindDetail(kind string, ivs []interval) string {
	byName := map[string][]interval{}
	for _, iv := range ivs {
		if kindOf(iv.Name) == kind {
			byName[iv.Name] = append(byName[iv.Name], iv)
		}
	}
	switch kind {
	case kindSemaphore, kindFUSemaphore:
		peak := 0
		for _, es := range byName {
			p, _ := holdersAtOnce(es, semLimit)
			peak = max(peak, p)
		}
		return fmt.Sprintf(" (at most %d of %d permits held at once)", peak, semLimit)
	case kindRW, kindFURW:
		writes, readers := 0, 0
		for _, es := range byName {
			var reads []interval
			for _, iv := range es {
				if iv.Write {
					writes++
				} else {
					reads = append(reads, iv)
				}
			}
			p, _ := holdersAtOnce(reads, len(reads))
			readers = max(readers, p)
		}
		return fmt.Sprintf(" (%d writes; at most %d readers at once)", writes, readers)
	case kindMulti:
		sets := 0
		for _, es := range byName {
			for _, iv := range es {
				if len(iv.Names) > 1 {
					sets++
				}
			}
		}
		return fmt.Sprintf(" (%d of several names at once)", sets)
	}
	return ""
}

// summary is the line that says what the run checked and survived.
func (r *run) summary(ivs []interval, violations int) string {
	type stats struct{ holds, long, lost, open, acrossStop int }
	perKind := map[string]*stats{}
	for _, k := range kinds {
		perKind[k] = &stats{}
	}
	slotOf := r.slotOf()
	perOffset := map[time.Duration]int{}
	perPath := map[path]int{}
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
		perOffset[slotOf[iv.Pid].offset]++
		perPath[slotOf[iv.Pid].path]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "torture %s: %d acquisitions checked in %v over %d names by %d worker processes, %d violations (clock +1h: %d holds, -1h: %d",
		r.tg.Name, len(ivs), time.Since(r.started).Round(time.Second), len(r.names), len(r.procs), violations,
		perOffset[time.Hour], perOffset[-time.Hour])
	if r.tg.Dialect == dblock.Postgres {
		fmt.Fprintf(&b, "; through PgBouncer: %d holds, %d of them with a direct session connection", perPath[pooled]+perPath[pooledSession], perPath[pooledSession])
	}
	b.WriteString(")")
	for _, k := range kinds {
		s := perKind[k]
		fmt.Fprintf(&b, "; %s: %d holds, %d past the TTL, %d ended by a lost lock, %d cut off by SIGKILL, %d held across a SIGSTOP",
			k, s.holds, s.long, s.lost, s.open, s.acrossStop)
		b.WriteString(kindDetail(k, ivs))
	}
	c := r.counts
	fmt.Fprintf(&b, "; survived %d SIGKILLs, %d SIGSTOPs, %d connection cuts, %d server restarts",
		len(r.killedAt), len(r.stops), c.cuts, c.restarts)
	switch {
	case r.cfg.short:
		b.WriteString(" (restart skipped under -short)")
	case restartIsNoop(r.tg):
		fmt.Fprintf(&b, " (no-op: %s=true)", restartEnv(r.tg))
	}
	events := r.events()
	fmt.Fprintf(&b, ", %d sessions killed by the server in %d rounds (%d holding a held lock's session marker; %d workers logged a lost session connection)",
		c.sessionsKilled, c.sessionKills, c.markerSessionsKilled, events[eventSessionEnded])
	fmt.Fprintf(&b, ", %d read-only switches (%v read-only in all; %d workers had acquisitions refused with ErrReadOnly, %d lost a lock with it as cause)",
		c.readOnly, c.readOnlyFor.Round(100*time.Millisecond), events[eventReadOnly], events[eventReadOnlyLost])
	if r.cfg.short {
		b.WriteString(" (skipped under -short)")
	}
	if r.tg.Dialect == dblock.Postgres {
		fmt.Fprintf(&b, "; %d workers behind PgBouncer without a session connection detected the pooler", r.eventsOn(pooled)[eventPoolerDetected])
		if c.poolerCrashes > 0 {
			fmt.Fprintf(&b, "; PgBouncer itself crashed %d times and was started again", c.poolerCrashes)
		}
	}
	return b.String()
}
