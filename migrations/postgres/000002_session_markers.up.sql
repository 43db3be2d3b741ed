-- Version 2: session markers, for crash detection in about a second.
--
-- A holder whose Locker has a session connection records the key of the
-- session-scoped advisory lock it holds there (session_key) and the token
-- it took the row with (session_token). A contender that finds that marker
-- gone (the holder's session ended) may shorten the lease to a short grace
-- period; it trusts session_key only while session_token = token, so a
-- takeover by a library that does not know these columns (a rolling
-- upgrade) leaves a key that is never trusted. 0 means no marker: the lease
-- alone decides, as before.
--
-- Adding a NOT NULL column with a constant default rewrites no rows
-- (PostgreSQL 11+) and does not block readers for long.
ALTER TABLE dblock_locks
    ADD COLUMN IF NOT EXISTS session_key   bigint NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS session_token bigint NOT NULL DEFAULT 0;

-- A fair waiter's marker: a waiter whose session ended is passed over
-- after the grace period instead of the waiter TTL.
ALTER TABLE dblock_waiters
    ADD COLUMN IF NOT EXISTS session_key bigint NOT NULL DEFAULT 0;
