-- Named queries: tenant rows (made, locked, saved, listed).
-- {schema} is replaced by the quoted schema name; queries/locks.sql gives the lock order.

-- name: tenants_ensure
-- A new tenant starts with its queue's defaults as its effective settings. Rows are inserted
-- in the order given (sorted by the caller), so concurrent enqueues never wait in a cycle.
INSERT INTO {schema}.tenants (
    queue, tenant, tenant_key, weight, max_running, rate_count, rate_period, rate_burst
)
SELECT q.name, n.tenant, n.tenant_key, q.weight, q.max_running, q.rate_count, q.rate_period,
       q.rate_burst
FROM unnest(%(queues)s::text[], %(tenants)s::text[], %(keys)s::bytea[])
         WITH ORDINALITY AS n(queue, tenant, tenant_key, ord)
JOIN {schema}.queues q ON q.name = n.queue
ORDER BY n.ord
ON CONFLICT (queue, tenant_key) DO NOTHING

-- name: tenants_lock
-- The tenants of one event, locked in id order.
SELECT t.id, t.queue, t.tenant, t.own_weight, t.own_max_running, t.weight, t.max_running,
       t.finish_tag, t.start_tag, t.ready, t.scheduled, t.running, t.succeeded, t.failed,
       t.dead, t.own_rate_count, t.own_rate_period, t.own_rate_burst, t.rate_count,
       t.rate_period, t.rate_burst, t.tat, t.limited_until, t.usage, t.usage_at
FROM {schema}.tenants t
JOIN unnest(%(queues)s::text[], %(tenants)s::text[], %(keys)s::bytea[])
         AS n(queue, tenant, tenant_key)
  ON t.queue = n.queue AND t.tenant_key = n.tenant_key AND t.tenant = n.tenant
ORDER BY t.id
FOR UPDATE OF t

-- name: tenant_lock_by_id
SELECT id, queue, tenant, own_weight, own_max_running, weight, max_running,
       finish_tag, start_tag, ready, scheduled, running, succeeded, failed, dead,
       own_rate_count, own_rate_period, own_rate_burst, rate_count, rate_period, rate_burst,
       tat, limited_until, usage, usage_at
FROM {schema}.tenants
WHERE id = %(id)s
FOR UPDATE

-- name: tenant_save
-- Writes what the rules computed. The slot count may only grow while under the cap, and the
-- CHECK constraints keep every count at or above 0, so a bug can never over-book a tenant.
-- head_seq is re-read through jobs_ready after this transaction's job changes.
UPDATE {schema}.tenants SET
    own_weight = %(own_weight)s, own_max_running = %(own_max_running)s,
    weight = %(weight)s, max_running = %(max_running)s,
    own_rate_count = %(own_rate_count)s, own_rate_period = %(own_rate_period)s,
    own_rate_burst = %(own_rate_burst)s, rate_count = %(rate_count)s,
    rate_period = %(rate_period)s, rate_burst = %(rate_burst)s,
    tat = %(tat)s, limited_until = %(limited_until)s, usage = %(usage)s, usage_at = %(usage_at)s,
    finish_tag = %(finish_tag)s, start_tag = %(start_tag)s,
    head_seq = (SELECT j.seq FROM {schema}.jobs j
                WHERE j.tenant_id = %(id)s AND j.state = 'ready'
                ORDER BY j.priority DESC, j.seq
                LIMIT 1),
    ready = %(ready)s, scheduled = %(scheduled)s, running = %(running)s,
    succeeded = %(succeeded)s, failed = %(failed)s, dead = %(dead)s
WHERE id = %(id)s
  AND running = %(was_running)s
  AND (%(running)s::bigint <= %(was_running)s::bigint
       OR %(max_running)s::integer IS NULL
       OR %(running)s::bigint <= %(max_running)s::integer)
RETURNING id

-- name: tenants_of_queue
-- Every tenant of a queue, to resettle after its defaults change (admin path: set_queue).
SELECT id FROM {schema}.tenants WHERE queue = %(queue)s ORDER BY id

-- name: tenants_limited_due
-- Tenants whose rate limit is over, in (limited_until, tenant) order, through tenants_limited
-- (the tenant text is COLLATE "C": code-point order, as the reference model sorts).
SELECT id FROM {schema}.tenants
WHERE queue = %(queue)s AND limited_until IS NOT NULL AND limited_until <= %(now)s
ORDER BY limited_until, tenant

-- name: tenants_stats
-- Inspection, not a hot path: may scan tenants when no queue is given. Jobs still in the inbox
-- (enqueued while another transaction held their tenant, or in a caller's transaction; not yet
-- taken in) count as their tenant's, ready or scheduled as get_jobs shows them (inspect.py),
-- and a tenant known only to the inbox gets a row with its queue's defaults. One statement:
-- a take-in moves a job from the inbox to jobs in one transaction, so it is counted once.
WITH boxed AS (
    SELECT i.queue, i.tenant_key, i.tenant,
           count(*) FILTER (WHERE i.run_at <= i.enqueued_at) AS ready,
           count(*) FILTER (WHERE i.run_at > i.enqueued_at) AS scheduled,
           min(i.enqueued_at) FILTER (WHERE i.run_at <= i.enqueued_at) AS oldest_ready_at
    FROM {schema}.inbox i
    WHERE (%(queue)s::text IS NULL OR i.queue = %(queue)s::text)
      AND (%(tenant)s::text IS NULL
           OR (i.tenant_key = %(tenant_key)s AND i.tenant = %(tenant)s::text))
    GROUP BY i.queue, i.tenant_key, i.tenant
)
SELECT t.queue, t.tenant, t.weight, t.max_running, t.ready + coalesce(b.ready, 0) AS ready,
       t.scheduled + coalesce(b.scheduled, 0) AS scheduled, t.running, t.succeeded, t.failed,
       t.dead, t.cancelled, t.rate_count, t.rate_period, t.rate_burst, t.limited_until,
       t.usage, t.usage_at,
       (SELECT q.half_life FROM {schema}.queues q WHERE q.name = t.queue) AS half_life,
       LEAST((SELECT min(j.ready_at) FROM {schema}.jobs j
              WHERE j.tenant_id = t.id AND j.state = 'ready'), b.oldest_ready_at)
           AS oldest_ready_at
FROM {schema}.tenants t
LEFT JOIN boxed b ON b.queue = t.queue AND b.tenant_key = t.tenant_key AND b.tenant = t.tenant
WHERE (%(queue)s::text IS NULL OR t.queue = %(queue)s::text)
  AND (%(tenant)s::text IS NULL OR (t.tenant_key = %(tenant_key)s AND t.tenant = %(tenant)s::text))
UNION ALL
SELECT b.queue, b.tenant, coalesce(q.weight, 1.0), q.max_running, b.ready, b.scheduled, 0, 0,
       0, 0, 0, q.rate_count, q.rate_period, q.rate_burst, NULL, 0.0, 0.0, q.half_life,
       b.oldest_ready_at
FROM boxed b
LEFT JOIN {schema}.queues q ON q.name = b.queue
WHERE NOT EXISTS (SELECT 1 FROM {schema}.tenants t
                  WHERE t.queue = b.queue AND t.tenant_key = b.tenant_key AND t.tenant = b.tenant)
ORDER BY 1, 2
