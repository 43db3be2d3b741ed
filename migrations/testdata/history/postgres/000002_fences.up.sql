-- Fencing-token floors. A lock row's token grows by one at every takeover;
-- a name that has no row (first use, or reaped) starts from its stripe's
-- counter here (stripe = fnv1a64(name) mod 1024), drawn while that counter's
-- row is locked, in the statement or transaction that inserts the lock row.
-- Deleting lock rows raises the counter to their tokens first, so tokens per
-- name never go backwards. Rows here are never deleted.
CREATE TABLE IF NOT EXISTS dblock_fences (
    stripe integer NOT NULL PRIMARY KEY,
    token  bigint  NOT NULL
);
