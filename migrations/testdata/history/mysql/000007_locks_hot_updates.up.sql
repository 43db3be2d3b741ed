-- Acquire and release are each an UPDATE of the name's row, and both change
-- expires_at: an index on it cost each of them a secondary-index write. The
-- reaper now finds lapsed rows by walking the primary key, so the index
-- goes. (The file name says "hot" as its PostgreSQL twin does.)
ALTER TABLE dblock_locks DROP INDEX dblock_locks_expires_at;
