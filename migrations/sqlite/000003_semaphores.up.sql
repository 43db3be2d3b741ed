-- Version 3: the limits of semaphores, kept in step with PostgreSQL and
-- MySQL (changed_at in µs since the epoch, by the database clock).
CREATE TABLE IF NOT EXISTS dblock_semaphores (
    name       TEXT    NOT NULL PRIMARY KEY,
    permits    INTEGER NOT NULL,
    changed_at INTEGER NOT NULL
);
