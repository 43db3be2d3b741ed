ALTER TABLE dblock_locks DROP COLUMN IF EXISTS fence_writes;
