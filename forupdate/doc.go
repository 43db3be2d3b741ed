// Package forupdate implements dblock.Locker with row locks held by open
// transactions: the lock on a name is the row lock on that name's row in
// the table dblock_forupdate (create it with package migrations), taken by
// a transaction that stays open, on a connection of its own, until Release
// commits it.
//
// # Mechanism
//
// Acquire begins a transaction and locks the name's row with SELECT ...
// FOR UPDATE. It waits in the database itself: the server wakes the next
// waiter when the holder's transaction ends. TryAcquire uses SELECT ... FOR
// UPDATE NOWAIT and returns dblock.ErrNotAcquired at once. A name's row is
// created on first use (INSERT ... ON CONFLICT DO NOTHING, INSERT IGNORE),
// outside the lock's transaction.
//
// Once the row lock is held, the fencing token is drawn from a counter no
// rollback undoes: a sequence on PostgreSQL (nextval) and on MariaDB
// (NEXTVAL), drawn by the locking statement itself for the row it locked;
// on MySQL 8.0, which has no sequences, an AUTO_INCREMENT drawn right after
// the lock by a REPLACE into a counter table with one row per name. A
// token kept in the lock row and incremented in the lock's transaction
// would be rolled back with it, and handed out again after a holder that
// died or was cut off, while it may still act on it. Drawn after the lock
// is won, a token is larger than every earlier holder's. Tokens grow per
// name, with gaps: the counter is shared by all names. On PostgreSQL, a
// token drawn by a transaction that never committed can be handed out
// again after a crash of the database server, if no other commit flushed
// the log in between. A failover is another matter: the lock's
// transaction has not committed when its token is drawn, so no standby,
// synchronous or not, has the draw, and the promoted server's sequence
// may repeat it. So on PostgreSQL a token is the sequence's value plus
// the server's WAL timeline shifted left by 40 bits
// (lockkit.PgTimelineBase): a promotion starts a larger timeline, and the
// promoted server's tokens are above every token of the old primary.
// MariaDB's sequence writes its row once per 1000
// values, before handing them out; a restart skips what was left.
//
// A sequence leaves the lock transaction as light as the bare recipe's:
// on MariaDB an uncontended Acquire and Release costs about what BEGIN;
// SELECT ... FOR UPDATE; COMMIT does as database/sql sends it (see the
// figures in docs/benchmarks.md). On MySQL 8.0 the REPLACE makes every lock
// transaction a writing one, whose commit flushes the log where the bare
// recipe's writes nothing: expect about twice the bare recipe there.
//
// Ending Acquire's context stops the wait on the server, not only in the
// client (a PostgreSQL cancel request, sent on a connection of its own; on
// MySQL, KILL QUERY on the waiting connection, sent through another
// connection of the pool), and the connection returns to the pool with no
// transaction open. A MySQL pool may have no connection to spare for KILL
// QUERY, and cutting the waiting connection instead would leave the server
// waiting for the row lock on behalf of nobody. So on MySQL, Acquire tries
// NOWAIT first (an uncontended Acquire costs what TryAcquire does), then
// waits in statements that each wait at most two seconds, less when the
// context's deadline is nearer (the session's innodb_lock_wait_timeout,
// restored before Acquire returns), beginning again until it gets the
// lock. Canceled with no connection to spare, Acquire returns when the
// statement's bound runs out, its connection clean. Lock wait timeouts set
// on the server (lock_timeout, innodb_lock_wait_timeout) and deadlocks do
// not end Acquire: it waits again.
//
// # The transaction
//
// Lock.Tx is the lock's transaction: work done in it commits atomically
// with Release and is seen by the next holder, and Lock.Rollback discards
// it and releases the lock too. See Lock.Tx for the rules of its use. On
// PostgreSQL it runs at READ COMMITTED; on MySQL at the server's default
// level, whose snapshot starts at the first plain read, after the lock is
// held.
//
// # Liveness
//
// A holder whose process dies frees the lock at once: its connection closes
// and the server rolls its transaction back. A holder cut off by the network
// is ended by the server after the TTL (dblock.TTL, default
// dblock.DefaultTTL): the lock's session gets PostgreSQL's
// idle_in_transaction_session_timeout (set LOCAL by the locking statement)
// or MySQL's wait_timeout (whole seconds, rounded up; set before the
// transaction, one statement, and restored after it, before the connection
// returns to the pool: Release does not wait for that, and Locker.Close
// does). A
// live holder keeps its session from timing out by pinging it every TTL/3
// in the background; if no ping succeeds for TTL minus a tenth, it
// declares the lock lost, before the server could have ended the session:
// Done is closed, Context canceled, and Err returns an error wrapping
// dblock.ErrLockLost.
//
// # Connections
//
// Every held lock keeps one connection of the *sql.DB pool for as long as
// it is held, and every Acquire waiting for a lock keeps one while it
// waits. Size the pool (SetMaxOpenConns) for the locks held and awaited at
// once plus the application's own work. When the pool has no connection
// to give within the connection timeout (WithConnTimeout), Acquire fails
// with ErrNoConnection instead of waiting, possibly forever, for a lock
// holder to give one back.
//
// # Reentrancy
//
// An Acquire whose context carries the owner of a hold made through the
// same Locker re-enters it at once: no second transaction, the same token
// and Tx; a re-entry keeps the first acquisition's TTL. The lock is freed
// when the last hold is released. Share one Locker per *sql.DB.
//
// # Lock kinds
//
// Besides the mutex of Acquire, a Locker has counting semaphores
// (Locker.Semaphore: N slot rows per name, a permit taken with SELECT ...
// FOR UPDATE SKIP LOCKED) and read/write locks (Locker.Readers and
// Locker.Writers: one row per name, locked FOR SHARE or FOR UPDATE). Each
// hold is a transaction as above, with its Tx, liveness and tokens; see
// Semaphore and RWLocker for what each promises. Semaphores record their
// limit in dblock_semaphores (migration 3).
//
// # Options
//
// dblock.TTL bounds how long the server keeps a silent holder's session;
// dblock.Note is ignored. dblock.Fair and dblock.MinHold are refused with
// dblock.ErrInvalidOption: the database orders the waiters, and the lock
// cannot outlive its transaction. Locker.CheckOptions (lockkit.OptionChecker)
// tells so without I/O. Every name keeps its row for good (one per job
// for the cron guards). A lock that ends with its transaction cannot keep
// a run's tick for MinHold, so over this Locker a cron guard serializes
// jobs but cannot deduplicate their runs across replicas; use rowlock for
// those.
//
// # Schema
//
// PostgreSQL:
//
//	CREATE TABLE dblock_forupdate (
//	    name varchar(255) NOT NULL PRIMARY KEY
//	);
//	-- CACHE 1 (the default): values grow in the order they are drawn.
//	CREATE SEQUENCE dblock_forupdate_tokens AS bigint;
//
// MySQL and MariaDB (byte-wise names: no collation folds two names into
// one):
//
//	CREATE TABLE dblock_forupdate (
//	    name VARBINARY(255) NOT NULL PRIMARY KEY
//	) ENGINE=InnoDB;
//
// MariaDB's counter (its cache is shared by all sessions, so values still
// grow in the order they are drawn; NEXTVAL needs the INSERT privilege on
// it; Galera clusters refuse cached sequences, and their row locks are
// local to a node, so forupdate is not for Galera):
//
//	CREATE SEQUENCE dblock_forupdate_tokens CACHE 1000;
//
// MySQL 8.0's counter:
//
//	CREATE TABLE dblock_forupdate_tokens (
//	    name  VARBINARY(255) NOT NULL PRIMARY KEY,
//	    token BIGINT         NOT NULL AUTO_INCREMENT,
//	    KEY (token)
//	) ENGINE=InnoDB;
//
// A token column in dblock_forupdate, if present, is not used. Rows are
// never deleted by this package; deleting one is harmless (it is created
// again), and so is deleting counter rows on MySQL 8.0.
package forupdate
