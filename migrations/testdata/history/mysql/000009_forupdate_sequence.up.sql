-- On MariaDB, forupdate's token counter becomes a sequence (MariaDB 10.3+;
-- MySQL 8.0 has none and keeps the table). The locking SELECT then draws
-- the token itself, with NEXTVAL, once the row lock is won: no write, so
-- the lock's COMMIT flushes no log, where the table's REPLACE cost a flush
-- per acquisition.
--
-- Each step is prepared from a string chosen by the server's kind, so that
-- MySQL runs "DO 0" instead (an executable comment would leave MySQL an
-- empty statement, which is an error). The table is renamed first, so that
-- nothing draws from it while its next value is read, and the sequence
-- starts past every token the table gave: tokens keep growing across the
-- change. The rename waits for transactions that drew from the table to
-- end, that is for forupdate locks held at the time to be released. A
-- library older than this schema then fails on MariaDB (no table to
-- REPLACE into) rather than draw tokens from a second counter. The
-- session's user variables are cleared at the end: the connection goes
-- back to the caller's pool.
SET @sqllock_mariadb = VERSION() LIKE '%MariaDB%';

SET @sqllock_sql = IF(@sqllock_mariadb, 'RENAME TABLE dblock_forupdate_tokens TO dblock_forupdate_tokens_v8', 'DO 0');
PREPARE sqllock_stmt FROM @sqllock_sql;
EXECUTE sqllock_stmt;
DEALLOCATE PREPARE sqllock_stmt;

SET @sqllock_sql = IF(@sqllock_mariadb,
    'SELECT GREATEST(COALESCE(MAX(token), 0) + 1, COALESCE((SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ''dblock_forupdate_tokens_v8''), 1)) INTO @sqllock_next FROM dblock_forupdate_tokens_v8',
    'DO 0');
PREPARE sqllock_stmt FROM @sqllock_sql;
EXECUTE sqllock_stmt;
DEALLOCATE PREPARE sqllock_stmt;

-- CACHE: values are handed out from memory, 1000 per write of the
-- sequence's row; a restart skips what was left of the cache, which only
-- makes tokens jump ahead.
SET @sqllock_sql = IF(@sqllock_mariadb, CONCAT('CREATE SEQUENCE dblock_forupdate_tokens START WITH ', @sqllock_next, ' CACHE 1000'), 'DO 0');
PREPARE sqllock_stmt FROM @sqllock_sql;
EXECUTE sqllock_stmt;
DEALLOCATE PREPARE sqllock_stmt;

SET @sqllock_sql = IF(@sqllock_mariadb, 'DROP TABLE dblock_forupdate_tokens_v8', 'DO 0');
PREPARE sqllock_stmt FROM @sqllock_sql;
EXECUTE sqllock_stmt;
DEALLOCATE PREPARE sqllock_stmt;

SET @sqllock_mariadb = NULL, @sqllock_sql = NULL, @sqllock_next = NULL;
