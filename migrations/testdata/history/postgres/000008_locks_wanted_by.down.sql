ALTER TABLE dblock_locks DROP COLUMN IF EXISTS wanted_by;
