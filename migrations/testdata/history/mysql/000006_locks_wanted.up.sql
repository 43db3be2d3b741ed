-- Kept in step with PostgreSQL, where a waiter sets it to ask the release
-- for a NOTIFY. MySQL has no notifications: waiters poll and this stays false.
ALTER TABLE dblock_locks ADD COLUMN wanted BOOLEAN NOT NULL DEFAULT FALSE;
