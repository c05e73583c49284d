-- fairq SQLite schema, version 8: per-tenant figures (fairq/figures.py). One row per
-- (slot, tenant, kind, bucket) with a count: kind 'w' waits and 'r' run times by histogram
-- bucket, 'o' ends by outcome (bucket: the outcome's index). Rows of slots older than the
-- window are deleted as the clock moves on (figures.py), through the primary key's slot prefix.
CREATE TABLE figures (
    slot      INTEGER NOT NULL,
    tenant_id INTEGER NOT NULL,
    kind      TEXT NOT NULL,
    bucket    INTEGER NOT NULL,
    count     INTEGER NOT NULL,
    PRIMARY KEY (slot, tenant_id, kind, bucket)
) WITHOUT ROWID;
