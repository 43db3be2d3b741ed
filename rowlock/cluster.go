package rowlock

// # Galera clusters
//
// On a MariaDB Galera cluster (or Percona XtraDB Cluster) every node
// accepts writes, and lock rows, leases and tokens are replicated and
// certified like any rows. But GET_LOCK and IS_FREE_LOCK are each node's
// own: a waiter on node 2 would find the marker of a live holder on node
// 1 free, judge that holder crashed, and cut its lease short. So a
// session that finds its server is a Galera node (lockkit.GaleraQuery)
// takes no marker and no doorbells, for good: holds depend on their
// leases alone, waiters poll, and a waiter never judges a holder by a
// marker (watcher.watch, waiting's askWake refuse to). Crash recovery
// then takes up to one TTL instead of the crash grace.
//
// Row locks are each node's own too: CheckHeld's LOCK IN SHARE MODE on
// node 1 does not stop a takeover on node 2, and the fenced transaction
// could commit after the lock changed hands. Galera certifies writes
// instead: of two transactions on two nodes that write one row, the one
// that commits second fails with error 1213 (or is aborted before). So on
// a Galera node CheckHeld writes the holder's row (myCheckHeldWrite): a
// fenced transaction and a takeover of its lock can no longer both
// commit, whichever node each runs on. The write must change a value:
// an UPDATE that changes nothing gives MariaDB no key to certify.

// myCheckHeldWrite is CheckHeld on a Galera node: myCheckHeld's test, as
// an UPDATE that changes the row (fence_writes, migration 5), so that the
// fenced transaction carries the row in its write set. Same parameters as
// myCheckHeld.
const myCheckHeldWrite = `
UPDATE ` + locksTable + ` SET fence_writes = fence_writes + 1
WHERE name = ? AND owner_host = ? AND owner_id = ? AND token = ?
  AND hold_count > 0 AND expires_at > UTC_TIMESTAMP(6)`
