// Package gocronlock adapts any dblock.Locker to the distributed Locker and
// Elector interfaces of go-co-op/gocron v2, so that gocron schedulers on
// several replicas coordinate through the PostgreSQL or MySQL database they
// already use.
//
// Locker runs each run of a job on one replica: gocron asks it for the
// job's lock, named after the job, before every run and releases it
// afterwards. Like the robfig/cron guard in package cronguard (the two
// share their logic and their option names), it keeps one lock, and one
// row in the lock table, per job, and holds it for half the job's period
// from the run's start, so that a replica firing the same run less than
// half a period after the first skips it, and the replicas firing the next
// run find it free. gocron does not tell a Locker the job's schedule: the
// Locker learns the period as the shortest gap between the runs it has
// seen of the job, and holds FirstHold after the first (WithMinHold sets a
// fixed hold instead). A run still going when the next one fires
// keeps the lock, and that run is skipped: runs never overlap across
// replicas. It does not wait. gocron gives the locker no way to hand the
// job a context: a job that must stop when its lock is lost should use
// cronguard or package leader instead. NewLocker refuses a dblock.Locker
// that would refuse its locks at every run, such as forupdate's, which
// cannot hold a lock past its release.
//
// Elector makes one replica the leader, which runs every job; the others skip
// them until it steps down or dies. Run it (Elector.Run) for as long as the
// scheduler runs.
package gocronlock
