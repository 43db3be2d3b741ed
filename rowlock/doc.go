// Package rowlock implements dblock.Locker with a row per held lock in the
// table dblock_locks (create it with package migrations).
//
// Each name has one row; the primary key on the name lets exactly one
// contender create it. The row carries a lease (expires_at, judged by the
// database clock) that the holder renews every TTL/3. Releasing ends the
// lease at once; a row whose lease has lapsed, released or not, is taken over
// by the next contender with one UPDATE, so a crashed holder blocks others
// for at most one TTL. The host and owner columns make the lock reentrant.
//
// The fencing token lives in the row and grows by one at every takeover,
// under the row lock. Released rows stay, keeping the token, until Sweep (run
// by package reaper) deletes lapsed rows; it first raises the token counter
// of each row's stripe to the row's token, and a fresh row draws its first
// token from that counter in the statement or transaction that inserts it.
// So tokens grow strictly per name across releases, takeovers, sweeps and
// restarts. Do not delete lock rows by hand: to free a lock whose holder
// is stuck, or to make a hold lost in a test, Revoke ends its lease and
// keeps its token.
//
// A holder that cannot renew in time closes Done and cancels its Context
// before the database could consider the lease expired. Data written under
// the lock can be fenced: CheckHeld, run in the writing transaction, proves
// the lock is still held and keeps it from being taken until that
// transaction ends.
//
// # Fencing tokens across a failover
//
// A primary that dies can take its last commits with it when its standby
// replicates asynchronously (PostgreSQL's default): takeovers and the
// tokens they drew, which the promoted standby never saw. So on
// PostgreSQL every token drawn carries the server's WAL timeline in its
// high bits (lockkit.PgTimelineBase: at least timeline<<40), read in the
// statement that draws it. Promotion starts a new, larger timeline at
// once, so the first token the promoted server draws for a name is above
// every token the old primary drew for it, lost or not, and none is handed
// out twice. Rows written before this scheme (timeline 0 in the high bits)
// jump once to their timeline's base at their next takeover: tokens still
// only grow. MySQL and SQLite have no timeline; their tokens count from 1.
//
// # Fencing: why no one takes a lock under an open fenced transaction
//
// CheckHeld reads the holder's row with its name, owner and token, and a
// live lease, locked in shared mode (FOR SHARE; LOCK IN SHARE MODE). The
// shared lock lasts until the transaction ends, however long the holder
// then stalls, and its lease may lapse meanwhile. Every acquisition that
// would pass over that row waits for the shared lock to go:
//
//   - A takeover of a mutex, of a semaphore's slot, of a name of
//     AcquireAll, or of a read/write lock's writer or reader row, is an
//     UPDATE of that very row, which waits for it.
//   - A writer does not take the reader rows; it only needs them lapsed.
//     Before it completes it reads them again locked for update (settle),
//     which waits for every reader's fenced transaction. A new reader
//     likewise settles a writer row it finds lapsed. A plain read of the
//     rows would not wait, and a writer would pass a reader whose fenced
//     read was still open (the hole TestNoTakeoverUnderAnOpenFence
//     catches).
//   - A semaphore whose limit changes, or whose record the sweep deletes,
//     counts the other slots' live holders locked for update (countLive),
//     so a slot held under an open fenced transaction still counts.
//   - The sweep deletes only rows it could lock (SKIP LOCKED).
//
// After the wait each row is read in its newest version: a holder that
// renewed in between is live and waited for; one whose lease lapsed can no
// longer pass CheckHeld, whose read requires a live lease, and its
// renewals never revive a lapsed lease.
//
// TryAcquire does not wait behind a live holder's fenced transaction: its
// take does not wait for row locks (PostgreSQL: a lock_timeout set for the
// take's own statement; MariaDB: SET STATEMENT innodb_lock_wait_timeout=0),
// and when it finds the row locked, a plain read tells a live lease (not
// acquired, at once) from a lapsed one, whose lock is most likely brief (a
// sweep deleting the row, a take or release in flight): the take is tried
// again waiting at most a second, then not acquired. MySQL has neither
// setting: there a try reads the row first and does not try a lease with
// time left. The kinds' TryAcquire does not wait at all. A fenced
// transaction also holds off its own holder's renewals: keep it shorter
// than the TTL.
//
// # Releases that do not wait for the disk
//
// On PostgreSQL a release commits with synchronous_commit off, for its own
// transaction only (pgRelease): it does not wait for its WAL to be flushed,
// which makes it about a quarter faster. What a server crash can then lose
// is a release whose commit was not yet on disk, and losing a release is
// harmless: the row shows the hold again after recovery, and its lease runs
// out (at most one TTL), as if the holder had died without releasing. It
// can lose nothing else, because WAL is flushed in order: any later
// transaction that waited for its own flush, such as an acquisition taking
// the row over, carries the release with it. So no token is ever drawn on
// top of a release that is then lost, and tokens never go backwards.
// Acquisitions, renewals and everything that draws a token keep synchronous
// commits: a lost acquisition would let the next holder draw the same
// token. With synchronous replication the release does not wait for the
// standby either; after a failover it may likewise be lost, and the lease
// decides. MySQL has no per-transaction setting for this
// (innodb_flush_log_at_trx_commit is global): its releases flush.
//
// # Crash detection
//
// A holder that dies would block others for its whole lease (30 s by
// default); with session markers it blocks them for about the crash grace
// G (WithCrashGrace, 1 s by default), whatever the TTL, while a live
// holder still always stops first.
//
// Each Locker keeps one session connection (WithSessionDB) while it holds
// locks or has waiters. On it, the Locker holds a session-scoped marker
// with a fresh random key: pg_advisory_lock(key) on PostgreSQL,
// GET_LOCK('sqllock.<key>') on MySQL. The server frees it exactly when
// that session ends: the process died, its connection was closed or cut,
// the server killed the session. Keys are never reused, so a marker that
// has gone never comes back. Every row the Locker takes records the key
// (session_key) and the token it was taken with (session_token); the key is
// trusted only while session_token equals the row's token, so a takeover by
// a version of this library that does not write the columns leaves a key
// nobody trusts, and a re-entry under another key records none.
// PostgreSQL takes also hold, for their own transaction only, a two-key
// advisory lock (1397836875, hash of the owner) that an acquisition cut
// short waits for before it undoes what the server may still have done
// for it (see takeMarkClass); an application that uses that two-key space
// can only delay such an undo, never a take.
//
// A waiter that finds the lock held under a marker has its Locker's
// watcher block one pool connection in the database on that marker
// (pg_advisory_xact_lock_shared; GET_LOCK), which the server grants the
// moment the holder's session ends: waiters learn of a death without
// polling (the wait is renewed every 5 s while needed). Then the watcher
// shortens the row's lease to
// at most now+G by the database clock (never below MinHold, never
// lengthening it, and only for that token and key), and the waiter takes
// the lock once that has lapsed, as any lapsed lease. Fair waiters are
// passed over the same way: a waiter row records its Locker's key, and a
// waiter queued behind one whose marker is gone shortens its place.
//
// Why a live holder stops first. The holder proves its marker every G/3
// on the session connection, with a statement that answers true only if
// the marker is held by the very session that answers (so a pooler in
// between cannot pass off another session's answer), and trusts its locks
// until 0.9·G after it sent the last such heartbeat that succeeded (time
// t, by its monotonic clock). Past that, or as soon as the session
// connection fails, it declares every lock taken under that marker lost:
// Done closes, renewals stop, and Err compares the clock itself, so a
// paused process finds out on waking. Now the marker was held when that
// heartbeat ran on the server, which was after t; a contender shortens the
// lease only after seeing the marker gone, so later still, at some T > t;
// and the lock can then be taken no earlier than T+G > t+G by the database
// clock. The holder stopped at t+0.9·G by its own clock, which is earlier
// as long as the two clocks' rates differ by less than a tenth: the same
// margin the lease relies on (rule 2). The lease rule holds independently:
// shortening never lengthens a lease, and a renewal never revives a lapsed
// one. A holder that is paused (SIGSTOP, a long GC) keeps its marker, since
// its session lives, so nobody cuts its lease short; it declares its locks
// lost when it wakes past the deadline, and releasing them (Release still
// frees the row) lets the next holder in at once.
//
// Without a usable session connection (a pool with no connection to
// spare, a transaction pooler in front of it, WithCrashGrace(0)) rows carry
// no marker and the lease alone decides, as before. The cost of markers:
// the session connection, one heartbeat every G/3 while the Locker holds
// locks, and, while its waiters wait on marked holders, one blocked pool
// connection per holder's marker (at most four per Locker; beyond that
// waiters wait for leases).
//
// # Waking waiters
//
// Waiters in the same process are woken directly by a release. Waiters in
// other processes are woken by the database:
//
//   - PostgreSQL: releases are announced with NOTIFY, and the session
//     connection LISTENs and wakes the Locker's waiters, once a NOTIFY
//     round trip has shown that notifications come back on it (through a
//     transaction pooler they do not: waiters then poll, and the Locker
//     says so once in its log).
//   - MySQL has no notifications. Each session connection holds, besides
//     its marker, a "doorbell": user-level locks named after the marker
//     and a generation, the current one recorded in dblock_sessions
//     (migration version 4). A waiter reads the holder's generation, then
//     marks the row wanted, then blocks a pool connection of its Locker in
//     GET_LOCK on that bell; the holder's release sees wanted and its
//     session rings: it lets the bell go (and takes a later one). The order
//     of those steps is why no ring is missed, and why an old generation
//     only wakes a waiter early (the argument is in bell.go). A holder's
//     death frees its bells too, and the waiter, finding the marker free in
//     the same statement, handles it as a crash (above). The cost: while
//     Lockers wait on a holder's session, one blocked pool connection per
//     such session and Locker (at most four per Locker with the markers'
//     watches; beyond that waiters poll), and one GET_LOCK every 5 s each;
//     a release that rang costs its session two statements.
//
// Without these (WithListen(false); on MySQL also WithCrashGrace(0), or a
// holder whose session does not ring, such as one of an older version)
// waiters poll with backoff and jitter. Only the first waiter of a name in
// each Locker is woken, so a release never stampedes: the fair waiter with
// the oldest place in the queue, or with none queued the longest-waiting
// one.
//
// A lapsed lock goes only to a contender with no live fair waiter older
// than it, which every take checks in the database. On MySQL an unqueued
// contender first tries a take that skips that check while the row's
// queued flag is false (myTakeFast, which says why that proves the queue
// empty); fair waiters set the flag as they queue. Fair waiters of a
// version before schema version 4 do not: while such versions run beside
// this one (a rolling upgrade), a waiter of theirs can be passed by this
// version's unqueued contenders. Mutual exclusion is not affected.
//
// What the tables hold can be looked at without SQL: Locks and Held show
// the locks taken now, Waiters and AllWaiters the fair queues, Lapsed
// counts what is left to delete (the sqllock command's status uses them).
// Sweep and DeleteDeadWaiters delete it, in batches (package reaper runs
// them on a schedule).
//
// Contention never reaches callers: deadlocks, lock wait timeouts,
// serialization failures and unique violations between contenders (MySQL
// 1213, 1205, 1062; PostgreSQL 40P01, 40001, 23505). A try to take a lock
// retries them lockkit.MaxContentionRetries times, and when that budget runs
// out it counts as not acquired: TryAcquire returns dblock.ErrNotAcquired,
// Acquire keeps waiting. Every other statement (Release, Refresh, renewals,
// Sweep, and the fair queue's enqueue, heartbeat and leave) retries until it
// succeeds or its context ends, and then returns an error wrapping the
// context's error. CheckHeld runs in the caller's transaction, which the
// contention may have aborted: it does not retry, and reports that the hold
// could not be proven as dblock.ErrLockLost.
//
// # More lock kinds
//
// Three kinds are built from several lock rows, so that leases, renewal,
// fencing tokens, reentrancy, session markers and the reaper apply to each
// row as to any lock: AcquireAll holds several names or none (taken in one
// sorted order, so overlapping sets never deadlock); Semaphore hands out
// at most N permits per name (N slot rows, the agreed N recorded in
// dblock_semaphores); Readers and Writers are the two sides of read/write
// locks (a writer row and MaxReaders reader rows; waiting writers are not
// starved). Derived rows are named after the name, U+241F (␟) and a
// suffix: names containing it are refused (dblock.ErrInvalidName). They are not
// available on SQLite yet (errors.ErrUnsupported).
//
// # SQLite
//
// On an SQLite database (modernc.org/sqlite, detected from its
// *sqlite.Driver) the Locker coordinates the processes of one host that
// share the database file: a crontab on one machine, a desktop
// application, tests. It is not a distributed lock: processes on other
// hosts cannot share the file safely (SQLite's file locking does not hold
// over network file systems), and nothing on SQLite stands for a second
// host. Plain locks work as on the servers: leases by the database clock,
// fencing tokens, reentrancy, Fair, MinHold, CheckHeld, waiting by
// polling, Sweep and the reaper.
//
// What differs. The database clock is the host's clock, read by SQLite
// (unixepoch('subsec'): millisecond resolution), which every process on the
// host shares; a step of that clock (an NTP correction, a manual change)
// moves every lease with it: forward, leases lapse early and their holders
// lose them; backward, a crashed holder's lease lasts longer. There are no
// sessions, so no session markers: the Locker runs lease-only, as with
// WithCrashGrace(0), which it sets itself; a crashed holder blocks others
// until its lease lapses (the TTL, 30 s by default). There are no
// notifications: waiters in other processes poll (every 10 ms at most);
// those in the same process are woken by a release.
//
// SQLite lets one connection write the file at a time. Every statement the
// Locker runs that writes is one statement (taken atomically, without row
// locks), and the sweep's read-then-write runs in a BEGIN IMMEDIATE
// transaction, so contending processes wait their turn rather than fail.
// That waiting needs a busy timeout on every connection, which only the DSN
// can give a whole pool: the Locker checks it at its first statement and
// migrations.Up before migrating, and without one both fail with
// dblock.ErrInvalidDB saying to add _pragma=busy_timeout(5000) (for example
// file:locks.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)). The
// library never changes the settings of your connections; migrations.Up
// puts the file in WAL mode (persistent in the file), where readers never
// block the writer. Use a file: an in-memory database is private to one
// connection. For CheckHeld, begin the writing transaction with BEGIN
// IMMEDIATE (the DSN's _txlock=immediate): a deferred transaction that
// reads and then writes fails with SQLITE_BUSY when another connection
// wrote in between (safe, but an error to retry).
package rowlock
