-- fairq PostgreSQL schema, version 8: every enqueue goes through functions/enqueue.sql, which
-- stores a job directly when its tenant is free and puts it in the inbox when another
-- transaction holds the tenant (a dispatch picking from it, an ack); whoever holds the tenant
-- next takes its inbox rows in first. The inbox is found by tenant as tenants are: by
-- tenant_key, sha256 of the tenant's UTF-8 text (tenant ids have no length limit, btree
-- entries do).
ALTER TABLE {schema}.inbox ADD COLUMN tenant_key bytea;
UPDATE {schema}.inbox SET tenant_key = sha256(convert_to(tenant, 'UTF8'));
ALTER TABLE {schema}.inbox ALTER COLUMN tenant_key SET NOT NULL;
CREATE INDEX inbox_tenant ON {schema}.inbox (queue, tenant_key, seq);
