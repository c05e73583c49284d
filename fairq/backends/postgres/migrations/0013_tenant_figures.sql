-- fairq PostgreSQL schema, version 13: the current slot's waits and succeeded run times of a
-- tenant are counted in its row, which the dispatch and the ack write anyway, instead of in a
-- figures row of their own per (tenant, bucket) written on every dispatch and every ack; they
-- are added to figures when the tenant's slot changes (functions/figures.sql). fig_keys holds
-- the bucket of a wait, or 32 + the bucket of a run; fig_counts the count of each.
ALTER TABLE {schema}.tenants ADD COLUMN fig_slot bigint NOT NULL DEFAULT 0;
ALTER TABLE {schema}.tenants ADD COLUMN fig_keys integer[] NOT NULL DEFAULT '{}';
ALTER TABLE {schema}.tenants ADD COLUMN fig_counts integer[] NOT NULL DEFAULT '{}';
