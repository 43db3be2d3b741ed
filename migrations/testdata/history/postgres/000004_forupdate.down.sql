DROP TABLE IF EXISTS dblock_forupdate;
