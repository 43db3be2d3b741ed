ALTER TABLE dblock_waiters DROP COLUMN session_key;
ALTER TABLE dblock_locks DROP COLUMN session_token;
ALTER TABLE dblock_locks DROP COLUMN session_key;
