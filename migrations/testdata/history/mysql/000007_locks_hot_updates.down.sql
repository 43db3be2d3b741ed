ALTER TABLE dblock_locks ADD INDEX dblock_locks_expires_at (expires_at);
