DROP TABLE IF EXISTS dblock_locks;
