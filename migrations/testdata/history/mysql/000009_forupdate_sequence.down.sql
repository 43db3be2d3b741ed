-- Back to the counter table on MariaDB, its AUTO_INCREMENT past the
-- sequence's last value (MySQL: nothing to undo). See the up file for why
-- each step is prepared.
SET @sqllock_mariadb = VERSION() LIKE '%MariaDB%';

SET @sqllock_sql = IF(@sqllock_mariadb, 'RENAME TABLE dblock_forupdate_tokens TO dblock_forupdate_tokens_v9', 'DO 0');
PREPARE sqllock_stmt FROM @sqllock_sql;
EXECUTE sqllock_stmt;
DEALLOCATE PREPARE sqllock_stmt;

SET @sqllock_sql = IF(@sqllock_mariadb, 'SELECT NEXTVAL(dblock_forupdate_tokens_v9) INTO @sqllock_next', 'DO 0');
PREPARE sqllock_stmt FROM @sqllock_sql;
EXECUTE sqllock_stmt;
DEALLOCATE PREPARE sqllock_stmt;

SET @sqllock_sql = IF(@sqllock_mariadb,
    CONCAT('CREATE TABLE dblock_forupdate_tokens (name VARBINARY(255) NOT NULL PRIMARY KEY, token BIGINT NOT NULL AUTO_INCREMENT, KEY (token)) ENGINE=InnoDB AUTO_INCREMENT=', @sqllock_next),
    'DO 0');
PREPARE sqllock_stmt FROM @sqllock_sql;
EXECUTE sqllock_stmt;
DEALLOCATE PREPARE sqllock_stmt;

SET @sqllock_sql = IF(@sqllock_mariadb, 'DROP SEQUENCE dblock_forupdate_tokens_v9', 'DO 0');
PREPARE sqllock_stmt FROM @sqllock_sql;
EXECUTE sqllock_stmt;
DEALLOCATE PREPARE sqllock_stmt;

SET @sqllock_mariadb = NULL, @sqllock_sql = NULL, @sqllock_next = NULL;
