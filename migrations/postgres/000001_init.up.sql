-- sqllock's schema, version 1. Later changes come as new migrations; this
-- file is never edited once released.

-- One row per lock name. The primary key on name is the lock: inserting the
-- row, or taking over a row whose lease has lapsed, acquires it. Released
-- rows stay (hold_count 0, expires_at in the past) and keep the name's token;
-- the reaper deletes them later, recording the token in dblock_fences under
-- the row's stripe. Times come from the database clock (timestamptz).
--
-- wanted is set by a waiter that sleeps until it is notified: the release
-- that frees the lock announces it (NOTIFY) only when someone asked, and the
-- next holder clears it. wanted_by is the host:pid of the one process whose
-- waiters asked, or '' once waiters of several processes have: a release
-- needs no NOTIFY when only its own process asked, since its waiters are
-- woken in memory, and a NOTIFY to a listening session makes the releasing
-- commit markedly slower.
--
-- Acquire and release each UPDATE the name's row and change expires_at, so
-- expires_at has no index: PostgreSQL cannot make an update HOT when an
-- indexed column changes, and every acquisition would write an entry in
-- each index and bloat them on busy names. The reaper finds lapsed rows by
-- walking the primary key instead, and pages keep room (fillfactor) for the
-- new row versions of HOT updates.
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
    expires_at     timestamptz   NOT NULL,
    wanted         boolean       NOT NULL DEFAULT false,
    wanted_by      varchar(255)  NOT NULL DEFAULT ''
) WITH (fillfactor = 70);

-- Fencing-token floors. A lock row's token grows by one at every takeover;
-- a name that has no row (first use, or reaped) starts from its stripe's
-- counter here (stripe = fnv1a64(name) mod 1024), drawn while that counter's
-- row is locked, in the statement or transaction that inserts the lock row.
-- Deleting lock rows raises the counter to their tokens first, so tokens per
-- name never go backwards. Rows here are never deleted.
CREATE TABLE IF NOT EXISTS dblock_fences (
    stripe integer NOT NULL PRIMARY KEY,
    token  bigint  NOT NULL
);

-- The FIFO queue of fair waiters: the identity id orders it, a waiter's
-- heartbeat pushes expires_at forward, and a waiter whose expires_at passed
-- (by the database clock) is dead and skipped.
CREATE TABLE IF NOT EXISTS dblock_waiters (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       varchar(255) NOT NULL,
    owner_host varchar(255) NOT NULL,
    owner_id   varchar(64)  NOT NULL,
    created_at timestamptz  NOT NULL,
    expires_at timestamptz  NOT NULL
);
CREATE INDEX IF NOT EXISTS dblock_waiters_name_id ON dblock_waiters (name, id);
CREATE INDEX IF NOT EXISTS dblock_waiters_expires_at ON dblock_waiters (expires_at);

-- One permanent row per name for the forupdate package: its lock is a
-- SELECT ... FOR UPDATE on this row, held by an open transaction. (token
-- is not used.)
CREATE TABLE IF NOT EXISTS dblock_forupdate (
    name  varchar(255) NOT NULL PRIMARY KEY,
    token bigint       NOT NULL DEFAULT 0
);

-- Fencing tokens of forupdate locks. A sequence, because a rollback (or
-- the death of the holder's connection) must not hand a token out again:
-- nextval is drawn after the row lock is won and is never undone.
CREATE SEQUENCE IF NOT EXISTS dblock_forupdate_tokens AS bigint;
