-- Named queries of the per-tenant figures (figures.py; functions/figures.sql).
-- {schema} is replaced by the quoted schema name; queries/locks.sql gives the lock order.

-- name: figures_add
-- The figures a fail or an expiry counted in one transaction (figures.sql: fig_add).
SELECT {schema}.fig_add(%(now)s, %(tenants)s::bigint[], %(kinds)s::text[], %(buckets)s::integer[])

-- name: figures_prune
-- Slots out of the window, through the key's slot prefix (maintain).
DELETE FROM {schema}.figures WHERE slot < %(first)s

-- name: figures_read
-- Inspection: the window's counts with their tenants (a forgotten tenant's are left out), and
-- those still in the tenants' rows (tenants.fig_*: waits, and 32 + bucket for succeeded runs).
SELECT f.slot, f.kind, f.bucket, f.count, t.queue, t.tenant
FROM {schema}.figures f JOIN {schema}.tenants t ON t.id = f.tenant_id
WHERE f.slot >= %(first)s AND (%(queue)s::text IS NULL OR t.queue = %(queue)s::text)
UNION ALL
SELECT t.fig_slot, CASE WHEN u.k >= 32 THEN 'r' ELSE 'w' END, mod(u.k, 32), u.c::bigint,
       t.queue, t.tenant
FROM {schema}.tenants t CROSS JOIN LATERAL unnest(t.fig_keys, t.fig_counts) AS u(k, c)
WHERE t.fig_slot >= %(first)s AND (%(queue)s::text IS NULL OR t.queue = %(queue)s::text)
