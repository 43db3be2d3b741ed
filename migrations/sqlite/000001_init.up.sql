-- sqllock's schema, version 1, for SQLite (modernc.org/sqlite, SQLite 3.42+).
-- The same tables as on PostgreSQL and MySQL, with the same meaning; see
-- those files for the reasons behind each column. What differs:
--
-- Times are INTEGER microseconds since the Unix epoch, UTC, written from the
-- database's clock (unixepoch('subsec'), which has millisecond resolution):
-- SQLite has no timestamp type, and integers compare and add exactly. All the
-- processes sharing the file read the one clock of their host.
--
-- Names are TEXT with SQLite's default BINARY collation: they compare byte
-- for byte.
--
-- SQLite serializes writers on the whole file, so the row locks the other
-- dialects rely on are not needed: every statement that writes runs alone,
-- and the few read-then-write sequences run in BEGIN IMMEDIATE transactions.
CREATE TABLE IF NOT EXISTS dblock_locks (
    name           TEXT    NOT NULL PRIMARY KEY,
    stripe         INTEGER NOT NULL,
    token          INTEGER NOT NULL,
    owner_host     TEXT    NOT NULL,
    owner_id       TEXT    NOT NULL,
    hold_count     INTEGER NOT NULL DEFAULT 1,
    note           TEXT    NOT NULL DEFAULT '',
    acquired_at    INTEGER NOT NULL,
    min_hold_until INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL,
    wanted         INTEGER NOT NULL DEFAULT 0,
    wanted_by      TEXT    NOT NULL DEFAULT ''
);

-- Fencing-token floors per stripe (fnv1a64(name) mod 1024): a name with no
-- row starts above its stripe's counter, which deleting lock rows raises to
-- their tokens first. Rows here are never deleted.
CREATE TABLE IF NOT EXISTS dblock_fences (
    stripe INTEGER NOT NULL PRIMARY KEY,
    token  INTEGER NOT NULL
);

-- The FIFO queue of fair waiters. AUTOINCREMENT: ids only ever grow, never
-- reused after the newest waiter leaves, so the queue order is the id order.
CREATE TABLE IF NOT EXISTS dblock_waiters (
    id         INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    name       TEXT    NOT NULL,
    owner_host TEXT    NOT NULL,
    owner_id   TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS dblock_waiters_name_id ON dblock_waiters (name, id);
CREATE INDEX IF NOT EXISTS dblock_waiters_expires_at ON dblock_waiters (expires_at);

-- No forupdate tables: SQLite has no row locks, and package forupdate
-- refuses it.
