-- Version 4: the doorbells' table and the queued flag, kept in step with
-- PostgreSQL and MySQL (see the MySQL file of this version). SQLite has no
-- sessions to ring from: rowlock's waiters in other processes poll, and
-- these stay empty and TRUE (1).
CREATE TABLE IF NOT EXISTS dblock_sessions (
    session_key INTEGER NOT NULL PRIMARY KEY,
    bell        INTEGER NOT NULL,
    started_at  INTEGER NOT NULL
);

ALTER TABLE dblock_locks ADD COLUMN queued INTEGER NOT NULL DEFAULT 1;
