// Package cronguard makes each activation of a robfig/cron job run on one
// replica: every replica runs the same cron.Cron, and a Guard on it adds the
// jobs, each under its own name, taking the job's lock from any
// dblock.Locker before each run; the replicas that find it taken skip that
// activation.
//
//	c := cron.New(cron.WithSeconds())
//	guard, err := cronguard.New(c, locker)
//	...
//	_, err = guard.AddJob("jobs/report", "0 * * * * *", job)
//
// # Each job its own lock
//
// A job is added through the Guard, with a name, rather than wrapped by a
// cron.JobWrapper in the scheduler's chain: a chain wraps every job of the
// scheduler, so one wrapper with one lock name would make the jobs skip
// one another. The Guard refuses a second job of the same name
// (ErrDuplicateName). Names are the lock names: keep them unique across
// the application's guards, and give jobs of different applications
// sharing a database different names.
//
// # Which activation a run is, and why the lock is held after it
//
// A replica attributes its run to the activation of the job's schedule
// nearest to when it fires (Tick tells the job), and holds the job's lock
// at least until halfway to the next activation, even when the job
// finished sooner. So a replica that fires late (a slow host, a GC pause)
// or early (its clock ahead) by less than half the gap between activations
// finds the lock taken and skips: each activation runs once, on the replica
// that fired it first. The replicas firing the next activation find the
// lock free. A run still going when the next activation fires keeps the
// lock, and that activation is skipped everywhere: a job's runs never
// overlap across replicas.
//
// The lock table keeps one row per job: the guard needs no reaper.
//
// Replicas agree on the activations of a spec ("0 * * * * *"), which are
// times of day. A fixed delay ("@every 1m", cron.Every) counts from each
// Cron's start instead, so replicas share its activations only when they
// started within half the delay of one another; prefer specs.
//
// # Logs
//
// A guard logs where its Locker does (rowlock.WithLogger,
// forupdate.WithLogger): skipped runs at Debug, lost locks at Warn, lock
// errors at Error. A dblock.Locker of another kind can say where by having
// a Logger() *slog.Logger method; without one, the guard logs to
// slog.Default() at Warn and above.
//
// gocronlock does the same for gocron, with the same options.
package cronguard
