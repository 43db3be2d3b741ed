-- sqllock's schema, version 1, for MySQL 8.0 and MariaDB 10.6+. Later
-- changes come as new migrations; this file is never edited once released.

-- One row per lock name. The primary key on name is the lock: inserting the
-- row, or taking over a row whose lease has lapsed, acquires it. Released
-- rows stay (hold_count 0, expires_at in the past) and keep the name's token;
-- the reaper deletes them later, recording the token in dblock_fences under
-- the row's stripe. Names are VARBINARY so they compare byte for byte (no
-- case folding, no PAD SPACE). Times are DATETIME(6) written from
-- UTC_TIMESTAMP(6): never TIMESTAMP, which shifts with the session time zone.
--
-- wanted and wanted_by are kept in step with PostgreSQL, where they ask a
-- release for a NOTIFY and say which process asked. MySQL has no
-- notifications: waiters poll, and the columns stay FALSE and ''.
--
-- Acquire and release each UPDATE the name's row and change expires_at, so
-- expires_at has no index, which would cost each of them a secondary-index
-- write: the reaper finds lapsed rows by walking the primary key.
CREATE TABLE IF NOT EXISTS dblock_locks (
    name           VARBINARY(255) NOT NULL PRIMARY KEY,
    stripe         INT            NOT NULL,
    token          BIGINT         NOT NULL,
    owner_host     VARCHAR(255)   NOT NULL,
    owner_id       VARBINARY(64)  NOT NULL,
    hold_count     INT            NOT NULL DEFAULT 1,
    note           VARCHAR(1024)  NOT NULL DEFAULT '',
    acquired_at    DATETIME(6)    NOT NULL,
    min_hold_until DATETIME(6)    NOT NULL,
    expires_at     DATETIME(6)    NOT NULL,
    wanted         BOOLEAN        NOT NULL DEFAULT FALSE,
    wanted_by      VARCHAR(255)   NOT NULL DEFAULT ''
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Fencing-token floors. A lock row's token grows by one at every takeover;
-- a name that has no row (first use, or reaped) starts from its stripe's
-- counter here (stripe = fnv1a64(name) mod 1024), drawn while that counter's
-- row is locked, in the statement or transaction that inserts the lock row.
-- Deleting lock rows raises the counter to their tokens first, so tokens per
-- name never go backwards. Rows here are never deleted.
CREATE TABLE IF NOT EXISTS dblock_fences (
    stripe INT    NOT NULL PRIMARY KEY,
    token  BIGINT NOT NULL
) ENGINE=InnoDB;

-- The FIFO queue of fair waiters: the auto-increment id orders it, a
-- waiter's heartbeat pushes expires_at forward, and a waiter whose expires_at
-- passed (by the database clock) is dead and skipped.
CREATE TABLE IF NOT EXISTS dblock_waiters (
    id         BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name       VARBINARY(255) NOT NULL,
    owner_host VARCHAR(255)   NOT NULL,
    owner_id   VARBINARY(64)  NOT NULL,
    created_at DATETIME(6)    NOT NULL,
    expires_at DATETIME(6)    NOT NULL,
    INDEX dblock_waiters_name_id (name, id),
    INDEX dblock_waiters_expires_at (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- One permanent row per name for the forupdate package: its lock is a
-- SELECT ... FOR UPDATE on this row, held by an open transaction. (token
-- is not used.)
CREATE TABLE IF NOT EXISTS dblock_forupdate (
    name  VARBINARY(255) NOT NULL PRIMARY KEY,
    token BIGINT         NOT NULL DEFAULT 0
) ENGINE=InnoDB;

-- Fencing tokens of forupdate locks, from a counter that no rollback gives
-- back, drawn once the row lock is won.
--
-- MariaDB: a sequence, which the locking SELECT draws from itself with
-- NEXTVAL: no write, so the lock's COMMIT flushes no log. CACHE: values are
-- handed out from memory, 1000 per write of the sequence's row; a restart
-- skips what was left of the cache, which only makes tokens jump ahead.
--
-- MySQL 8.0 has no sequences: REPLACE of a name's row draws a fresh
-- AUTO_INCREMENT value, which a rollback does not give back (InnoDB keeps
-- the counter across restarts).
--
-- The statement is prepared from a string chosen by the server's kind, the
-- one way one file can hold DDL that only one of them parses. The session's
-- user variable is cleared at the end: the connection goes back to the
-- caller's pool.
SET @sqllock_sql = IF(VERSION() LIKE '%MariaDB%',
    'CREATE SEQUENCE IF NOT EXISTS dblock_forupdate_tokens CACHE 1000',
    'CREATE TABLE IF NOT EXISTS dblock_forupdate_tokens (name VARBINARY(255) NOT NULL PRIMARY KEY, token BIGINT NOT NULL AUTO_INCREMENT, KEY (token)) ENGINE=InnoDB');
PREPARE sqllock_stmt FROM @sqllock_sql;
EXECUTE sqllock_stmt;
DEALLOCATE PREPARE sqllock_stmt;
SET @sqllock_sql = NULL;
