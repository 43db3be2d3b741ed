-- One permanent row per name for the forupdate package: its lock is a
-- SELECT ... FOR UPDATE on this row, held by an open transaction.
CREATE TABLE IF NOT EXISTS dblock_forupdate (
    name  VARBINARY(255) NOT NULL PRIMARY KEY,
    token BIGINT         NOT NULL DEFAULT 0
) ENGINE=InnoDB;
