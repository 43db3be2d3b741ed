-- One row per lock name. The primary key on name is the lock: inserting the
-- row, or taking over a row whose lease has lapsed, acquires it. Released
-- rows stay (hold_count 0, expires_at in the past) and keep the name's token;
-- the reaper deletes them later, recording the token in dblock_fences under
-- the row's stripe. Names are VARBINARY so they compare byte for byte (no
-- case folding, no PAD SPACE). Times are DATETIME(6) written from
-- UTC_TIMESTAMP(6): never TIMESTAMP, which shifts with the session time zone.
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
    INDEX dblock_locks_expires_at (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
