-- fairq PostgreSQL schema, version 8: reserved (taken by a change on another branch; this
-- placeholder keeps the versions without gaps until they are merged and renumbered).
SELECT 1;
