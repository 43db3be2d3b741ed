ALTER TABLE dblock_locks DROP COLUMN fence_writes;
