// Package gocronlock lets go-co-op/gocron v2 schedulers on several
// replicas run each job once, through any dblock.Locker. Locker runs each
// run of a job on one replica; Elector makes one replica the leader, which
// runs every job.
//
//	gl, err := gocronlock.NewLocker(locker)
//	if err != nil {
//		return err
//	}
//	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(gl))
//
// ExampleLocker and ExampleElector run against a real database.
//
// Locker takes the job's lock, named after the job, before every run. It
// does not wait: a replica that finds the lock taken skips the run. gocron
// gives a Locker no context to hand the job: a job that must stop when its
// lock is lost should use cronguard or package leader instead. NewLocker
// refuses a Locker whose locks cannot outlive their release, such as
// forupdate's. Run an Elector (Elector.Run) for as long as the scheduler
// runs.
//
// # Safety rule: one run per activation
//
// As in cronguard (the two share their logic and option names), the lock
// is held for half the job's period from the run's start. So a replica
// firing the same run less than half a period late skips it, and the next
// run finds the lock free. gocron does not tell a Locker the schedule: the
// Locker learns the period as the shortest gap between the runs it has
// seen, and holds FirstHold after the first run (WithLockOptions with dblock.MinHold sets a fixed
// hold instead). A run still going when the next fires keeps the lock, so
// runs never overlap across replicas. See the repository's
// docs/design.md, section "Cron guards: one run per activation".
package gocronlock
