ALTER TABLE dblock_locks DROP COLUMN queued;
DROP TABLE IF EXISTS dblock_sessions;
