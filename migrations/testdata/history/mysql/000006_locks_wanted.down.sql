ALTER TABLE dblock_locks DROP COLUMN wanted;
