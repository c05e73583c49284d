-- Named queries of the per-tenant figures (figures.py; functions/figures.sql).
-- {schema} is replaced by the quoted schema name; queries/locks.sql gives the lock order.

-- name: figures_add
-- The figures a fail or an expiry counted in one transaction (figures.sql: fig_add).
SELECT {schema}.fig_add(%(now)s, %(tenants)s::bigint[], %(kinds)s::text[], %(buckets)s::integer[])

-- name: figures_prune
-- Slots out of the window, through the key's slot prefix (maintain).
DELETE FROM {schema}.figures WHERE slot < %(first)s

-- name: figures_read
-- Inspection: the window's counts with their tenants (a forgotten tenant's are left out).
SELECT f.slot, f.kind, f.bucket, f.count, t.queue, t.tenant
FROM {schema}.figures f JOIN {schema}.tenants t ON t.id = f.tenant_id
WHERE f.slot >= %(first)s AND (%(queue)s::text IS NULL OR t.queue = %(queue)s::text)
