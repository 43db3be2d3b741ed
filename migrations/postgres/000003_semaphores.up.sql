-- Version 3: the limits of semaphores (rowlock.Locker.Semaphore).
--
-- A semaphore of limit N named s is N rows of dblock_locks, one per permit
-- ("slot"), each a lock with its lease, token and session marker. This
-- table records the N that the holders of s agreed on, so that a holder
-- asking with another N gets an error rather than silently letting more
-- (or fewer) in. Every acquisition reads it FOR SHARE once it has taken its
-- slot; it changes only while no slot is held by anyone else (the row
-- locked FOR UPDATE, then the slots found free). changed_at is when the
-- row was written, by the database clock.
CREATE TABLE IF NOT EXISTS dblock_semaphores (
    name       varchar(255) NOT NULL PRIMARY KEY,
    permits    integer      NOT NULL,
    changed_at timestamptz  NOT NULL
);
