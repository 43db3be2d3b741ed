-- Fencing tokens of forupdate locks. A sequence, because a rollback (or
-- the death of the holder's connection) must not hand a token out again:
-- nextval is drawn after the row lock is won and is never undone.
CREATE SEQUENCE IF NOT EXISTS dblock_forupdate_tokens AS bigint;
