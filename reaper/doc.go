// Package reaper deletes what sqllock leaves behind in the database: lock
// rows whose lease has lapsed (released locks keep their row, and so do
// crashed holders), the recorded limits of semaphores no one holds, and
// dead fair-queue waiters. Start one on every replica, as a robfig/cron
// job in the application; or run it once with RunOnce (`sqllock reap`
// does that from a crontab).
//
//	r, err := reaper.New(locker, reaper.WithSchedule("@every 5m"))
//	if err != nil {
//		return err
//	}
//	r.Start()
//	defer func() { <-r.Stop().Done() }()
//
// Example and ExampleReaper_RunOnce run against a real database. A sweep
// first takes the reaper lock (DefaultLockName) without waiting, so one
// replica sweeps at a time and the others skip their turn. The reaper logs
// to the Locker's logger: sweeps that deleted something at Info, the
// others at Debug, failures at Error.
//
// # Safety rules
//
// Never a live lock: whether a lease has lapsed is judged by the database
// clock, in the statement that deletes the row, with the row locked. A
// holder renewing at that moment either renews first, or had already
// declared the lock lost. Rows released early under MinHold stay until
// MinHold has passed, and WithGrace keeps rows a little longer still.
//
// Never a token backwards: before it deletes a row, a sweep raises the
// token counter that a fresh row of that name draws from, in the same
// transaction.
//
// Never in the way: a sweep walks the lock table once, in primary-key
// order, in short transactions of WithBatchSize rows that skip rows an
// acquirer has locked. So acquirers keep their latency while a million
// rows are swept (TestSweepUnderLoad measures it).
//
// The arguments are in the repository's docs/design.md, section "The
// reaper".
package reaper
