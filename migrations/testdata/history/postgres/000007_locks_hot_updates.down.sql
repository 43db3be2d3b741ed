ALTER TABLE dblock_locks RESET (fillfactor);
CREATE INDEX IF NOT EXISTS dblock_locks_expires_at ON dblock_locks (expires_at);
