-- Drops everything 000001_init.up.sql creates, and every lock and waiter.
DROP TABLE IF EXISTS dblock_waiters;
DROP TABLE IF EXISTS dblock_fences;
DROP TABLE IF EXISTS dblock_locks;
