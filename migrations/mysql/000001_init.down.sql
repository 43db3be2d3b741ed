-- Drops everything 000001_init.up.sql creates, and every lock and waiter.
-- DROP TABLE drops MariaDB's sequence as well as MySQL 8.0's counter table.
DROP TABLE IF EXISTS dblock_forupdate_tokens;
DROP TABLE IF EXISTS dblock_forupdate;
DROP TABLE IF EXISTS dblock_waiters;
DROP TABLE IF EXISTS dblock_fences;
DROP TABLE IF EXISTS dblock_locks;
