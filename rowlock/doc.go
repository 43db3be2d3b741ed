// Package rowlock gives distributed locks kept as rows of a lock table,
// on PostgreSQL, MySQL, MariaDB or SQLite. A lock is a row with a lease
// that its holder renews in the background. Each acquisition gets a
// fencing token, and a holder can prove, inside the transaction that
// writes, that it still holds the lock. Create the tables with package
// migrations.
//
//	locker, err := rowlock.New(db) // never closes db
//	if err != nil {
//		return err
//	}
//	defer locker.Close()
//	lock, err := locker.Acquire(ctx, "orders/42", dblock.TTL(30*time.Second))
//	if err != nil {
//		return err // dblock.ErrNotAcquired, joined with ctx.Err(), if ctx ended first
//	}
//	defer lock.Release(ctx)
//	// In the transaction that writes: dblock.ErrLockLost means do not write.
//	if err := dblock.CheckHeld(ctx, lock, tx); err != nil {
//		return err
//	}
//
// Example, ExampleLock_CheckHeld, ExampleLocker_Acquire_timeout,
// ExampleLocker_Semaphore, ExampleLocker_Writers and
// ExampleLocker_AcquireAll run against a real database.
//
// # Using it
//
// Acquire waits; TryAcquire returns dblock.ErrNotAcquired at once. The
// options of an acquisition are dblock's: TTL (the lease, default
// dblock.DefaultTTL, renewed every TTL/3), MinHold, Fair and Note. An
// Acquire whose context carries the holder's owner (Lock.Context)
// re-enters the lock. Lock.Done closes when the lock is lost. Share one
// Locker per *sql.DB. Semaphore(n), Readers and Writers, and AcquireAll
// give the other kinds of lock, each a dblock.Locker; they are not on
// SQLite yet.
//
// A holder that crashes blocks others for about a second (WithCrashGrace),
// not its whole lease: the Locker keeps a session connection whose end
// the server reports. Behind a transaction pooler such as PgBouncer, give
// it a direct connection (WithSessionDB). The other options of New are
// WithListen, WithWaiterTTL, WithLogger, WithMeterProvider and
// WithDialect. On SQLite, a Locker locks the processes of one host that
// share the file; its DSN must set a busy timeout.
//
// # Safety rules
//
// Each rule is argued in the repository's docs/design.md, section
// "rowlock: why it is safe"; the code it depends on points there.
//   - One holder at a time: a row is taken over only once its lease has
//     lapsed by the database clock.
//   - A live holder stops first: it declares its lock lost 0.9 TTL after
//     its last successful renewal was sent, and with crash detection 0.9 G
//     after its last proof of its session marker, by its own clock.
//   - Tokens never go backwards: a takeover raises the row's token under
//     the row lock, a fresh row draws from its stripe's counter, which the
//     sweep raises first, and PostgreSQL tokens carry the WAL timeline.
//   - No takeover under an open fenced transaction: CheckHeld locks the
//     row in shared mode until the transaction ends, and every takeover
//     waits for that lock.
//   - A lost release is harmless: PostgreSQL releases do not wait for the
//     disk, and losing one only lets its lease run out.
//   - Fair waiters: a lapsed lock goes only to a contender with no older
//     live fair waiter.
//   - Contention never reaches callers: deadlocks and lock timeouts between
//     contenders are retried, or mean "not acquired".
package rowlock
