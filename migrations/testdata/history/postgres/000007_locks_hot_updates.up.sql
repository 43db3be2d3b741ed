-- Acquire and release are each an UPDATE of the name's row. With an index
-- on expires_at, which both change, every one of them wrote a new entry in
-- each index of the table (PostgreSQL cannot make an update HOT when an
-- indexed column changes) and left the indexes to bloat on busy names. The
-- reaper now finds lapsed rows by walking the primary key, so the index
-- goes, and pages keep room for the new row versions of HOT updates.
DROP INDEX IF EXISTS dblock_locks_expires_at;
ALTER TABLE dblock_locks SET (fillfactor = 70);
