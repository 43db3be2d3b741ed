-- Version 4: doorbells, which wake waiters in other processes when a lock
-- they wait for is released (rowlock; MySQL has no LISTEN/NOTIFY), and a
-- flag that lets an uncontended acquisition skip the fair queue.
--
-- A Locker's session connection holds its session marker (GET_LOCK
-- 'sqllock.<key>') and two "bells", user-level locks named
-- 'sqllock.<key>.<generation>'. A waiter in another process reads here the
-- generation of the holder's session, asks the holder's release to ring
-- (dblock_locks.wanted), and blocks in GET_LOCK on that bell. To ring, the
-- session releases its current bell and takes the one after next; only
-- then is bell raised here. A generation is never taken again once
-- released, so a waiter that read an old one wakes at once and never
-- misses a ring; one that read the current one wakes at the next ring or
-- when the holder's session ends (which frees every bell).
--
-- A row exists while its session rings: written when the session starts,
-- deleted when it stops; rows of sessions that died (their marker is free)
-- are deleted by the reaper. Without a row, waiters poll.
CREATE TABLE IF NOT EXISTS dblock_sessions (
    session_key BIGINT      NOT NULL PRIMARY KEY,
    bell        BIGINT      NOT NULL,
    started_at  DATETIME(6) NOT NULL
) ENGINE=InnoDB;

-- queued is FALSE only when the name had no fair waiter when a takeover
-- last looked, and none has queued since: a fair waiter sets it, in the
-- transaction that inserts its dblock_waiters row, before that insert;
-- a takeover that finds no other waiter row for the name clears it. An
-- acquisition that finds the row lapsed and not queued takes it over
-- without reading dblock_waiters, which costs MariaDB about a tenth of
-- an uncontended acquire and release. New rows start TRUE (the next
-- takeover looks), and so do the rows of a schema upgraded to version 4.
ALTER TABLE dblock_locks ADD COLUMN queued BOOLEAN NOT NULL DEFAULT TRUE;
