-- Version 4: doorbells, which wake a MySQL waiter in another process when
-- the lock it waits for is released, and the queued flag that lets a MySQL
-- acquisition skip the fair queue (see the MySQL file of this version).
-- PostgreSQL wakes waiters with LISTEN/NOTIFY and checks the queue in the
-- same statement at no measurable cost, so it uses neither; they exist here
-- so that both schemas have the same tables and columns at each version, as
-- wanted and wanted_by exist on MySQL.
CREATE TABLE IF NOT EXISTS dblock_sessions (
    session_key bigint      NOT NULL PRIMARY KEY,
    bell        bigint      NOT NULL,
    started_at  timestamptz NOT NULL
);

ALTER TABLE dblock_locks ADD COLUMN IF NOT EXISTS queued boolean NOT NULL DEFAULT true;
