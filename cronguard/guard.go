package cronguard

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"weak"

	"github.com/robfig/cron/v3"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/tickguard"
)

// Guard adds jobs to a cron.Cron so that each activation of each job runs
// on one replica. Its methods are safe for concurrent use, before or after
// the Cron starts.
type Guard struct {
	c      *cron.Cron
	tg     *tickguard.Guard
	logger *slog.Logger
	ctx    context.Context
	names  map[string]cron.EntryID // c's guarded jobs, by name: guarded by cronNames
}

// cronNames holds, for each Cron, the names of the jobs that any Guard
// added to it: two Guards on one Cron must not share a name either. Its
// keys are weak, so that a Cron the application drops is forgotten.
var cronNames = struct {
	sync.Mutex
	m map[weak.Pointer[cron.Cron]]map[string]cron.EntryID
}{m: map[weak.Pointer[cron.Cron]]map[string]cron.EntryID{}}

// namesOf returns the job names guarded on c, shared by its Guards.
func namesOf(c *cron.Cron) map[string]cron.EntryID {
	key := weak.Make(c)
	cronNames.Lock()
	defer cronNames.Unlock()
	names, ok := cronNames.m[key]
	if !ok {
		names = map[string]cron.EntryID{}
		cronNames.m[key] = names
		runtime.AddCleanup(c, func(key weak.Pointer[cron.Cron]) {
			cronNames.Lock()
			defer cronNames.Unlock()
			delete(cronNames.m, key)
		}, key)
	}
	return names
}

// New returns a Guard adding jobs to c, taking their locks from l. By
// default a replica does not wait (TryAcquire: another replica runs this
// activation), and holds a job's lock until halfway to the job's next
// activation (see the package doc). A job adapted with Job gets the lock's
// context, canceled when the lock is lost. The lock is released when the
// job returns or panics.
//
// Errors wrap dblock.ErrInvalidOption. New also refuses a Locker that
// would refuse the guard's acquisitions at every run: a forupdate Locker
// cannot hold a lock past its release, so over it only
// WithLockOptions(dblock.MinHold(0)) is accepted, which serializes the
// replicas' runs but does not deduplicate them; use rowlock to run each
// activation once.
func New(c *cron.Cron, l dblock.Locker, opts ...Option) (*Guard, error) {
	cfg := config{tick: tickguard.DefaultConfig(), ctx: context.Background(), logger: lockkit.LoggerOf(l)}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("cronguard: %w", &dblock.OptionError{Option: "Option", Reason: "nil option"})
		}
		opt(&cfg)
	}
	switch {
	case c == nil:
		return nil, fmt.Errorf("cronguard: %w", &dblock.OptionError{Option: "Cron", Reason: "nil"})
	case cfg.ctx == nil:
		return nil, fmt.Errorf("cronguard: %w", &dblock.OptionError{Option: "WithContext", Reason: "nil context"})
	case cfg.logger == nil:
		return nil, fmt.Errorf("cronguard: %w", &dblock.OptionError{Option: "WithLogger", Reason: "nil logger"})
	}
	tg, err := tickguard.New(l, cfg.tick)
	if err != nil {
		return nil, fmt.Errorf("cronguard: %w", err)
	}
	return &Guard{c: c, tg: tg, logger: cfg.logger, ctx: cfg.ctx, names: namesOf(c)}, nil
}

// AddJob adds job to the Cron on spec, parsed by the Cron's parser (so
// cron.WithSeconds applies), under the lock name. It is the guarded
// cron.Cron.AddJob.
//
// name is the lock's name: a name of more than dblock.MaxNameLength bytes
// is shortened to its first bytes and a digest of the whole. Errors:
// dblock.ErrInvalidName for an empty name, or one with a NUL byte or not
// UTF-8; ErrDuplicateName for a name a Guard already guards on this Cron;
// ErrInvalidSchedule for a spec the parser refuses. Nothing is added then.
func (g *Guard) AddJob(name, spec string, job cron.Job) (cron.EntryID, error) {
	j, err := g.reserve(name, job)
	if err != nil {
		return 0, err
	}
	id, err := g.c.AddJob(spec, j)
	if err != nil {
		g.unreserve(name, 0)
		close(j.state.ready)
		return 0, fmt.Errorf("cronguard: job %q: %w %q: %w", name, ErrInvalidSchedule, spec, err)
	}
	// The Cron parsed the spec with its own parser; its entry has the
	// schedule the guard attributes runs to.
	j.state.schedule = g.c.Entry(id).Schedule
	close(j.state.ready)
	g.registered(name, id)
	return id, nil
}

// Schedule adds job to the Cron on schedule under the lock name: the
// guarded cron.Cron.Schedule. Errors as AddJob's; a nil schedule is
// ErrInvalidSchedule.
func (g *Guard) Schedule(name string, schedule cron.Schedule, job cron.Job) (cron.EntryID, error) {
	if schedule == nil {
		return 0, fmt.Errorf("cronguard: job %q: %w: nil", name, ErrInvalidSchedule)
	}
	j, err := g.reserve(name, job)
	if err != nil {
		return 0, err
	}
	j.state.schedule = schedule
	close(j.state.ready)
	id := g.c.Schedule(schedule, j)
	g.registered(name, id)
	return id, nil
}

// Remove removes the entry id from the Cron, and frees its name for
// another job. A run under way finishes.
func (g *Guard) Remove(id cron.EntryID) {
	g.c.Remove(id)
	cronNames.Lock()
	defer cronNames.Unlock()
	for name, entry := range g.names {
		if entry == id {
			delete(g.names, name)
		}
	}
}

// reserve checks name and takes it for job, whose guarded form it
// returns; the caller makes it ready.
func (g *Guard) reserve(name string, job cron.Job) (guardedJob, error) {
	if err := tickguard.ValidateBase(name); err != nil {
		return guardedJob{}, fmt.Errorf("cronguard: %w", err)
	}
	if job == nil {
		return guardedJob{}, fmt.Errorf("cronguard: job %q: %w", name, &dblock.OptionError{Option: "job", Reason: "nil"})
	}
	cronNames.Lock()
	defer cronNames.Unlock()
	if _, taken := g.names[name]; taken {
		return guardedJob{}, fmt.Errorf("cronguard: job %q: %w", name, ErrDuplicateName)
	}
	g.names[name] = 0 // taken; its entry comes once added
	return guardedJob{g: g, name: name, lockName: tickguard.Name(name), job: job,
		state: &jobState{ready: make(chan struct{})}}, nil
}

func (g *Guard) unreserve(name string, id cron.EntryID) {
	cronNames.Lock()
	defer cronNames.Unlock()
	if g.names[name] == id {
		delete(g.names, name)
	}
}

func (g *Guard) registered(name string, id cron.EntryID) {
	cronNames.Lock()
	defer cronNames.Unlock()
	if _, ok := g.names[name]; ok {
		g.names[name] = id
	}
}
