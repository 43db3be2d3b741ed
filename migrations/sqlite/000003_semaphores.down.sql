DROP TABLE IF EXISTS dblock_semaphores;
