-- Kept in step with PostgreSQL, where it says which process asked for a
-- release NOTIFY. MySQL has no notifications: it stays ''.
ALTER TABLE dblock_locks ADD COLUMN wanted_by VARCHAR(255) NOT NULL DEFAULT '';
