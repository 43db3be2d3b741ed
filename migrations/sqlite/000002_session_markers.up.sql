-- Version 2: the session-marker columns, kept in step with PostgreSQL and
-- MySQL. SQLite has no sessions to mark: rowlock runs lease-only on it, and
-- these stay 0.
ALTER TABLE dblock_locks ADD COLUMN session_key INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dblock_locks ADD COLUMN session_token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE dblock_waiters ADD COLUMN session_key INTEGER NOT NULL DEFAULT 0;
