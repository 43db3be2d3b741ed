-- Version 5: the counter that rowlock's CheckHeld writes on a Galera
-- cluster (see the MySQL file of this version). PostgreSQL has no
-- multi-primary cluster that sqllock supports: the column exists so that
-- every dialect has the same tables and columns at each version, and
-- stays 0.
ALTER TABLE dblock_locks ADD COLUMN IF NOT EXISTS fence_writes bigint NOT NULL DEFAULT 0;
