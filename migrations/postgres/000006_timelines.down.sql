DROP TABLE IF EXISTS dblock_timelines;
