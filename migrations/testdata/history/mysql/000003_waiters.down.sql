DROP TABLE IF EXISTS dblock_waiters;
