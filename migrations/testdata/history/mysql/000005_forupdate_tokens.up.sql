-- Fencing tokens of forupdate locks. MySQL has no sequences: REPLACE of a
-- name's row draws a fresh AUTO_INCREMENT value, which a rollback does not
-- give back (InnoDB persists the counter across restarts: MySQL 8.0,
-- MariaDB 10.2.4+).
CREATE TABLE IF NOT EXISTS dblock_forupdate_tokens (
    name  VARBINARY(255) NOT NULL PRIMARY KEY,
    token BIGINT         NOT NULL AUTO_INCREMENT,
    KEY (token)
) ENGINE=InnoDB;
