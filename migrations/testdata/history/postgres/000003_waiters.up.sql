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
