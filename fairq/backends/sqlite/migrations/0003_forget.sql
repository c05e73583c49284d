-- fairq SQLite schema, version 3: an idle tenant's row expires (issue 3). kept counts the
-- succeeded jobs still stored for a tenant: when pruning deletes its last stored job and it has
-- no settings of its own and no rate state in the future, its row is deleted.
ALTER TABLE tenants ADD COLUMN kept INTEGER NOT NULL DEFAULT 0;
UPDATE tenants SET kept = (
    SELECT count(*) FROM jobs WHERE jobs.tenant_id = tenants.id AND jobs.state = 'succeeded'
);
