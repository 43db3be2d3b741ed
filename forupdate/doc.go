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
// rollback undoes, in the locking statement itself: a sequence on
// PostgreSQL (nextval), an AUTO_INCREMENT on MySQL (REPLACE ... SELECT ...
// FOR UPDATE into a counter table with one row per name). A token kept in
// the lock row and incremented in the lock's transaction would be rolled
// back with it, and handed out again after a holder that died or was cut
// off, while it may still act on it. Drawn after the lock is won, a token
// is larger than every earlier holder's. Tokens grow per name, with gaps:
// the counter is shared by all names. On PostgreSQL, a token drawn by a
// transaction that never committed can be handed out again after a crash
// of the database server, if no other commit flushed the log in between.
//
// The token makes every lock transaction a writing one, whose commit
// flushes the log: on MySQL, where the bare SELECT ... FOR UPDATE
// transaction writes nothing, that and the session timeout (below) make
// an uncontended Acquire and Release cost two to three times the bare
// recipe. With binlog_format=STATEMENT, MySQL logs the REPLACE ... SELECT
// as unsafe for statement-based replication; use ROW or MIXED.
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
// transaction, restored before the connection returns to the pool). A
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
// # Options
//
// dblock.TTL bounds how long the server keeps a silent holder's session;
// dblock.Note is ignored. dblock.Fair and dblock.MinHold are refused with
// dblock.ErrInvalidOption: the database orders the waiters, and the lock
// cannot outlive its transaction. Locker.CheckOptions (dblock.OptionChecker)
// tells so without I/O, and Locker.KeepsNames (dblock.NameKeeper) that
// every name keeps its row: dblock.CronGuard and gocronlock ask both when
// they are built and refuse their defaults (a MinHold, and a new name per
// tick) over this Locker, which serializes jobs but cannot deduplicate
// their runs across replicas; use rowlock for those.
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
// MySQL (byte-wise names: no collation folds two names into one):
//
//	CREATE TABLE dblock_forupdate (
//	    name VARBINARY(255) NOT NULL PRIMARY KEY
//	) ENGINE=InnoDB;
//	CREATE TABLE dblock_forupdate_tokens (
//	    name  VARBINARY(255) NOT NULL PRIMARY KEY,
//	    token BIGINT         NOT NULL AUTO_INCREMENT,
//	    KEY (token)
//	) ENGINE=InnoDB;
//
// A token column in dblock_forupdate, if present, is not used. Rows are
// never deleted by this package; deleting one is harmless (it is created
// again), and so is deleting counter rows on MySQL.
package forupdate
