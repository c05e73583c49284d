-- Named queries of maintenance (maintenance.py, pruning.py): what is due, and
-- what is pruned.
-- {schema} is replaced by the quoted schema name; queries/locks.sql gives the lock order.

-- name: jobs_due_scheduled
-- Scheduled jobs whose time has come, in (run_at, seq) order, through jobs_scheduled.
SELECT j.seq, j.id, j.tenant_id, j.queue,
       (SELECT t.tenant FROM {schema}.tenants t WHERE t.id = j.tenant_id) AS tenant,
       j.name, j.state, j.payload, j.priority, j.attempts, j.max_attempts, j.lease_timeout,
       j.cost, j.enqueued_at, j.run_at, j.ready_at, j.started_at, j.deadline, j.finished_at,
       j.last_error, j.worker_id, j.leases, j.charged, j.headers, j.learn_cost, j.claimed
FROM {schema}.jobs j
WHERE j.queue = %(queue)s AND j.state = 'scheduled' AND j.run_at <= %(now)s
ORDER BY j.run_at, j.seq

-- name: jobs_overdue_running
-- Leases past their deadline, in (deadline, seq) order, through jobs_running.
SELECT j.seq, j.id, j.tenant_id, j.queue,
       (SELECT t.tenant FROM {schema}.tenants t WHERE t.id = j.tenant_id) AS tenant,
       j.name, j.state, j.payload, j.priority, j.attempts, j.max_attempts, j.lease_timeout,
       j.cost, j.enqueued_at, j.run_at, j.ready_at, j.started_at, j.deadline, j.finished_at,
       j.last_error, j.worker_id, j.leases, j.charged, j.headers, j.cancel_requested,
       j.learn_cost, j.claimed
FROM {schema}.jobs j
WHERE j.queue = %(queue)s AND j.state = 'running' AND j.deadline <= %(now)s
ORDER BY j.deadline, j.seq

-- name: next_due
-- The earliest scheduled run-at, lease deadline and end of a rate limit of one queue: three
-- index endpoints.
SELECT (SELECT j.run_at FROM {schema}.jobs j
        WHERE j.queue = %(queue)s AND j.state = 'scheduled'
        ORDER BY j.run_at, j.seq LIMIT 1) AS run_at,
       (SELECT j.deadline FROM {schema}.jobs j
        WHERE j.queue = %(queue)s AND j.state = 'running'
        ORDER BY j.deadline, j.seq LIMIT 1) AS deadline,
       (SELECT t.limited_until FROM {schema}.tenants t
        WHERE t.queue = %(queue)s AND t.limited_until IS NOT NULL
        ORDER BY t.limited_until LIMIT 1) AS limited_until

-- name: jobs_prune
-- Succeeded and cancelled jobs finished before the cut-off, through succeeded_jobs_finished,
-- and those whose kept result expired, through succeeded_jobs_results; how many each tenant
-- lost (in no particular order: tenants_unkeep locks the tenants in id order).
WITH gone AS (
    DELETE FROM {schema}.succeeded_jobs
    WHERE (finished_at < %(before)s AND result_until IS NULL)
       OR (result_until IS NOT NULL AND result_until <= %(now)s)
    RETURNING tenant_id
)
SELECT tenant_id, count(*) AS pruned FROM gone GROUP BY tenant_id

-- name: tenants_unkeep
-- Count pruned jobs off their tenants' kept, the rows locked in id order; returns what
-- fairq.policy.tenant.forgettable reads.
WITH pruned AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(counts)s::bigint[]) AS p(id, pruned)
), locked AS MATERIALIZED (
    SELECT t.id FROM {schema}.tenants t JOIN pruned p ON p.id = t.id ORDER BY t.id FOR UPDATE OF t
)
UPDATE {schema}.tenants t SET kept = t.kept - p.pruned
FROM pruned p JOIN locked l ON l.id = p.id
WHERE t.id = p.id
RETURNING t.id, t.ready, t.scheduled, t.running, t.dead, t.kept, t.tat,
          t.own_weight IS NOT NULL OR t.own_max_running IS NOT NULL
          OR t.own_rate_count IS NOT NULL AS own_settings

-- name: tenants_forget
-- Tenants with nothing stored, locked by tenants_unkeep in this transaction.
DELETE FROM {schema}.tenants WHERE id = ANY(%(ids)s::bigint[])

-- name: jobs_dead
SELECT j.seq, j.id, j.tenant_id, j.queue,
       (SELECT t.tenant FROM {schema}.tenants t WHERE t.id = j.tenant_id) AS tenant,
       j.name, j.state, j.payload, j.priority, j.attempts, j.max_attempts, j.lease_timeout,
       j.cost, j.enqueued_at, j.run_at, j.ready_at, j.started_at, j.deadline, j.finished_at,
       j.last_error, j.worker_id, j.leases, j.charged, j.headers, j.progress, j.learn_cost,
       j.claimed
FROM {schema}.jobs j
WHERE j.state = 'dead'
  AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
  AND (%(tenant)s::text IS NULL OR j.tenant_id IN (
          SELECT t.id FROM {schema}.tenants t
          WHERE t.tenant_key = %(tenant_key)s AND t.tenant = %(tenant)s::text))
ORDER BY j.finished_at, j.seq
LIMIT %(limit)s
