-- Version 6: the WAL timelines PostgreSQL primaries have served sqllock on,
-- and when each was first seen, by the database clock: rowlock's failover
-- pause (see rowlock's failover.go). After a promotion, no lock is taken
-- until first_seen of the new timeline plus the pause, so that a holder
-- whose last renewals were lost with the old primary has stopped first.
--
-- The timeline this migration runs on is recorded as known since forever
-- (no pause on it): a database upgraded to this version, or created, has
-- nothing to wait for, and a later timeline finds this one earlier.
CREATE TABLE IF NOT EXISTS dblock_timelines (
    timeline   bigint      NOT NULL PRIMARY KEY,
    first_seen timestamptz NOT NULL
);

INSERT INTO dblock_timelines (timeline, first_seen)
SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint, '-infinity'
ON CONFLICT (timeline) DO NOTHING;
