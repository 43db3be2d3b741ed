ALTER TABLE dblock_locks DROP COLUMN IF EXISTS queued;
DROP TABLE IF EXISTS dblock_sessions;
