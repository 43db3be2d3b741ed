-- Version 3: the limits of semaphores (rowlock.Locker.Semaphore).
--
-- A semaphore of limit N named s is N rows of dblock_locks, one per permit
-- ("slot"), each a lock with its lease, token and session marker. This
-- table records the N that the holders of s agreed on, so that a holder
-- asking with another N gets an error rather than silently letting more
-- (or fewer) in. Every acquisition reads it LOCK IN SHARE MODE once it has
-- taken its slot; it changes only while no slot is held by anyone else (the
-- row locked FOR UPDATE, then the slots found free). changed_at is when the
-- row was written, by the database clock (UTC_TIMESTAMP(6); never
-- TIMESTAMP). Names are VARBINARY, as in dblock_locks.
CREATE TABLE IF NOT EXISTS dblock_semaphores (
    name       VARBINARY(255) NOT NULL PRIMARY KEY,
    permits    INT            NOT NULL,
    changed_at DATETIME(6)    NOT NULL
) ENGINE=InnoDB;
