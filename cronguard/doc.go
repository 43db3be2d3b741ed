// Package cronguard runs each activation of a robfig/cron job on one
// replica. Every replica runs the same cron.Cron; a Guard adds the jobs,
// each under its own lock name, over any dblock.Locker. The replicas that
// find a job's lock taken skip that activation.
//
//	c := cron.New()
//	guard, err := cronguard.New(c, locker)
//	if err != nil {
//		return err
//	}
//	_, err = guard.AddJob("jobs/report", "* * * * *", cronguard.Job(
//		cronguard.ContextJobFunc(func(ctx context.Context) {
//			// Runs on one replica each minute; ctx ends if the lock is lost.
//		})))
//	c.Start()
//
// ExampleNew runs this against a real database. gocronlock does the same
// for go-co-op/gocron v2, with the same options.
//
// Jobs are added through the Guard, not wrapped by a cron.JobWrapper: a
// chain wraps every job of the scheduler, and one lock for all of them
// would make the jobs skip one another. The Guard refuses a second job of
// the same name (ErrDuplicateName). Names are lock names: keep them unique
// across the applications that share a database. Prefer specs ("0 * * * *")
// to fixed delays ("@every 1m"): replicas agree on a spec's times of day,
// while a delay counts from each Cron's start.
//
// # Safety rule: one run per activation
//
// A run is attributed to the activation nearest to when it fires (Tick
// tells the job). The guard holds the job's lock at least until halfway to
// the next activation, even when the job finished sooner. So a replica
// that fires the same activation late or early by less than half the gap
// finds the lock taken and skips it. A run still going at the next
// activation keeps the lock, so a job's runs never overlap across
// replicas. The argument is in the repository's docs/design.md, section
// "Cron guards: one run per activation". The lock table keeps one row per
// job, so the guard needs no reaper.
//
// # Logs
//
// A guard logs where its Locker does (rowlock.WithLogger,
// forupdate.WithLogger): skipped runs at Debug, lost locks at Warn, lock
// errors at Error. Over a Locker of another kind it logs to slog.Default()
// at Warn and above.
package cronguard
