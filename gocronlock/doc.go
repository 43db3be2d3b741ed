// Package gocronlock adapts any dblock.Locker to the distributed Locker and
// Elector interfaces of go-co-op/gocron v2, so that gocron schedulers on
// several replicas coordinate through the PostgreSQL or MySQL database they
// already use.
//
// Locker runs each run of a job on one replica: gocron asks it for a lock
// named after the job before every run and releases it afterwards. Like the
// robfig/cron guard in package cronguard (the two share their logic and
// their option names), it takes one lock per job and tick
// (name@tick, the fire time rounded to the tick), holds it at least one tick
// so that a replica whose clock or scheduler fires a little later skips the
// run, and does not wait. gocron gives the locker no way to hand the job a
// context: a job that must stop when its lock is lost should use cronguard
// or package leader instead. NewLocker refuses a dblock.Locker that would
// refuse its locks at every run, such as forupdate's, which cannot hold a
// lock past its release (MinHold) and keeps a row for every name.
//
// Elector makes one replica the leader, which runs every job; the others skip
// them until it steps down or dies. Run it (Elector.Run) for as long as the
// scheduler runs.
package gocronlock
