-- Who asked for a release NOTIFY (see 000006): the host:pid of the one
-- process whose waiters asked, or '' once waiters of several processes
-- have. A release needs no NOTIFY when only its own process asked: its
-- waiters are woken in memory, and a NOTIFY to a listening session makes
-- the releasing commit markedly slower.
ALTER TABLE dblock_locks ADD COLUMN IF NOT EXISTS wanted_by varchar(255) NOT NULL DEFAULT '';
