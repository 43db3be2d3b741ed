// Package reaper deletes what sqllock leaves behind in the database: lock
// rows whose lease has lapsed (released locks keep their row, and crashed
// holders leave theirs; semaphores' permits and read/write locks' holds
// are lock rows too), the recorded limits of semaphores no one holds, and
// dead fair-queue waiters. It runs as a
// robfig/cron job in the application, or once with RunOnce (`sqllock reap`
// does that from a shell or a crontab).
//
//	r, err := reaper.New(locker)
//	if err != nil {
//		return err
//	}
//	r.Start()
//	defer func() { <-r.Stop().Done() }()
//
// The reaper writes no SQL of its own: it works through the Locker it is
// given, whose Sweep deletes lock rows, SweepSemaphores semaphores' limits
// and DeleteDeadWaiters dead waiters. It logs to the Locker's logger
// (rowlock.WithLogger): each sweep that deleted something at Info, one that
// deleted nothing at Debug, failures at Error.
//
// Start it on every replica: a sweep first takes the reaper lock
// (DefaultLockName) without waiting, so one replica sweeps at a time and the
// others skip their turn.
//
// # Never a live lock
//
// Whether a lease has lapsed is judged by the database clock, in the
// statement that deletes the row, with the row locked: a holder renewing at
// that moment either renews first (and the row is no longer lapsed) or finds
// the row gone only if its lease had already lapsed, in which case the
// holder had declared the lock lost before. Rows released early under
// MinHold stay until MinHold has passed. The grace (WithGrace) keeps rows a
// little longer still. Deleting a row never lets fencing tokens go
// backwards: rowlock.Locker.Sweep records the row's token first, in the same
// transaction.
//
// # Never in the way
//
// A sweep walks the lock table once, in primary-key order, in batches
// (WithBatchSize): each batch reads the next rows without locking them and
// deletes the lapsed ones in its own short transaction that skips rows an
// acquirer has locked. So sweeping a million rows holds no lock for long,
// and acquirers keep their latency (TestSweepUnderLoad logs the figures;
// docs/benchmarks.md reports them).
package reaper
