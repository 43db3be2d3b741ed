-- One row per lock name. The primary key on name is the lock: inserting the
-- row, or taking over a row whose lease has lapsed, acquires it. Released
-- rows stay (hold_count 0, expires_at in the past) and keep the name's token;
-- the reaper deletes them later, recording the token in dblock_fences under
-- the row's stripe. Times come from the database clock (timestamptz).
CREATE TABLE IF NOT EXISTS dblock_locks (
    name           varchar(255)  NOT NULL PRIMARY KEY,
    stripe         integer       NOT NULL,
    token          bigint        NOT NULL,
    owner_host     varchar(255)  NOT NULL,
    owner_id       varchar(64)   NOT NULL,
    hold_count     integer       NOT NULL DEFAULT 1,
    note           varchar(1024) NOT NULL DEFAULT '',
    acquired_at    timestamptz   NOT NULL,
    min_hold_until timestamptz   NOT NULL,
    expires_at     timestamptz   NOT NULL
);
-- The reaper finds expired rows by this index.
CREATE INDEX IF NOT EXISTS dblock_locks_expires_at ON dblock_locks (expires_at);
