-- fairq PostgreSQL schema, version 8: reserved for a migration of another branch (numbers are
-- assigned per branch while several are built at once; the runner needs them without gaps).
-- Nothing to do. Delete this file when that branch's 0008 is merged.
SELECT 1;
