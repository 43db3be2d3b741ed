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
