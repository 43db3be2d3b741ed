-- Version 5: the counter that rowlock's CheckHeld writes on a Galera
-- cluster (see the MySQL file of this version); kept in step here, and 0.
ALTER TABLE dblock_locks ADD COLUMN fence_writes INTEGER NOT NULL DEFAULT 0;
