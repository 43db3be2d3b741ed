-- Set by a waiter that sleeps until it is notified; the release that frees
-- a lock announces it (NOTIFY) only when someone asked, and the next
-- holder clears it.
ALTER TABLE dblock_locks ADD COLUMN IF NOT EXISTS wanted boolean NOT NULL DEFAULT false;
