DROP SEQUENCE IF EXISTS dblock_forupdate_tokens;
