-- Version 2: session markers, for crash detection in about a second.
--
-- A holder whose Locker has a session connection records the key of the
-- GET_LOCK it holds there (session_key; the lock's name is 'sqllock.' and
-- the key in decimal) and the token it took the row with (session_token). A
-- contender that finds that marker free (the holder's session ended) may
-- shorten the lease to a short grace period; it trusts session_key only
-- while session_token = token, so a takeover by a library that does not
-- know these columns (a rolling upgrade) leaves a key that is never
-- trusted. 0 means no marker: the lease alone decides, as before.
--
-- MariaDB 10.3+ and MySQL 8.0 add trailing columns with a constant default
-- in place, without copying the table.
ALTER TABLE dblock_locks
    ADD COLUMN session_key   BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN session_token BIGINT NOT NULL DEFAULT 0;

-- A fair waiter's marker: a waiter whose session ended is passed over
-- after the grace period instead of the waiter TTL.
ALTER TABLE dblock_waiters
    ADD COLUMN session_key BIGINT NOT NULL DEFAULT 0;
