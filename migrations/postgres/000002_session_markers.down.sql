ALTER TABLE dblock_waiters DROP COLUMN IF EXISTS session_key;
ALTER TABLE dblock_locks
    DROP COLUMN IF EXISTS session_token,
    DROP COLUMN IF EXISTS session_key;
