-- fairq PostgreSQL schema, version 6: per-tenant figures (fairq/figures.py). One row per
-- (slot, tenant, kind, bucket) with a count: kind 'w' waits and 'r' run times by histogram
-- bucket, 'o' ends by outcome (bucket: the outcome's index). Written by dispatch and ack_held
-- (functions/) and by fail and expiry (figures.py), one statement per call, rows in key order;
-- rows of slots older than the window are deleted by maintain, through the key's slot prefix.
CREATE TABLE {schema}.figures (
    slot      bigint NOT NULL,
    tenant_id bigint NOT NULL,
    kind      text COLLATE "C" NOT NULL,
    bucket    integer NOT NULL,
    count     bigint NOT NULL,
    PRIMARY KEY (slot, tenant_id, kind, bucket)
);
