-- Version 6: PostgreSQL's table of WAL timelines (rowlock's failover
-- pause). This server has no timelines: nothing changes.
SELECT 1;
