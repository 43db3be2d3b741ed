DROP TABLE IF EXISTS dblock_fences;
