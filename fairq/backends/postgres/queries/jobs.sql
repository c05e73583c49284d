-- Named queries: job rows one event reads or writes (lookups, saves, a heartbeat's locks),
-- the learned costs and the job types.
-- {schema} is replaced by the quoted schema name; queries/locks.sql gives the lock order.

-- name: job_costs
-- Inspection: the learned costs (functions/costs.sql), by queue then name (code-point order).
SELECT queue, name, runs, mean FROM {schema}.job_costs
WHERE %(queue)s::text IS NULL OR queue = %(queue)s::text
ORDER BY queue, name

-- name: job_costs_learn
-- A reported failure's sample (events.py), folded as the acks fold theirs.
SELECT {schema}.learn_costs(
    %(queues)s::text[], %(names)s::text[], %(samples)s::double precision[])

-- name: job_lock_by_id
-- The job a lease token names, locked; its queue tells which queue lock the event needs.
SELECT j.seq, j.id, j.tenant_id, j.queue,
       (SELECT t.tenant FROM {schema}.tenants t WHERE t.id = j.tenant_id) AS tenant,
       j.name, j.state, j.payload, j.priority, j.attempts, j.max_attempts, j.lease_timeout,
       j.cost, j.enqueued_at, j.run_at, j.ready_at, j.started_at, j.deadline, j.finished_at,
       j.last_error, j.worker_id, j.leases, j.charged, j.headers, j.progress,
       j.cancel_requested, j.learn_cost, j.claimed
FROM {schema}.jobs j
WHERE j.id = %(id)s
FOR UPDATE

-- name: job_queue
SELECT queue FROM {schema}.jobs WHERE id = %(id)s

-- name: jobs_by_ids
-- Stored jobs, succeeded and cancelled ones included (their queue and tenant are their tenant
-- row's; what succeeded_jobs does not keep is not shown for them).
SELECT j.seq, j.id, j.tenant_id, j.queue,
       (SELECT t.tenant FROM {schema}.tenants t WHERE t.id = j.tenant_id) AS tenant,
       j.name, j.state, j.payload, j.priority, j.attempts, j.max_attempts, j.lease_timeout,
       j.cost, j.enqueued_at, j.run_at, j.ready_at, j.started_at, j.deadline, j.finished_at,
       j.last_error, j.worker_id, j.leases, j.charged, j.headers, j.progress,
       j.cancel_requested, NULL AS result, NULL::double precision AS result_until,
       j.learn_cost, j.claimed
FROM {schema}.jobs j
WHERE j.id = ANY(%(ids)s::text[])
UNION ALL
SELECT s.seq, s.id, s.tenant_id, t.queue, t.tenant, s.name, s.state, s.payload, s.priority,
       s.attempts, s.max_attempts, 0.0::double precision, 0.0::double precision, s.enqueued_at,
       s.run_at, s.ready_at, s.started_at, NULL, s.finished_at, s.last_error, NULL, 0,
       0.0::double precision, s.headers, NULL, NULL, s.result, s.result_until, true, true
FROM {schema}.succeeded_jobs s
JOIN {schema}.tenants t ON t.id = s.tenant_id  -- kept while it has succeeded jobs (kept > 0)
WHERE s.id = ANY(%(ids)s::text[])

-- name: succeeded_ids
-- Which of these ids a finished job holds (succeeded or cancelled: cancelling.py tells a
-- finished job from an unknown id).
SELECT id FROM {schema}.succeeded_jobs WHERE id = ANY(%(ids)s::text[]) ORDER BY id

-- name: job_checkpoint
UPDATE {schema}.jobs SET progress = %(progress)s WHERE seq = %(seq)s

-- name: job_save
UPDATE {schema}.jobs SET
    state = %(state)s, attempts = %(attempts)s, run_at = %(run_at)s, ready_at = %(ready_at)s,
    started_at = %(started_at)s, deadline = %(deadline)s, finished_at = %(finished_at)s,
    last_error = %(last_error)s, worker_id = %(worker_id)s, charged = %(charged)s,
    claimed = %(claimed)s
WHERE seq = %(seq)s

-- name: jobs_queues
-- The queues of the jobs a heartbeat names, whose shared locks it takes first.
SELECT DISTINCT queue FROM {schema}.jobs WHERE id = ANY(%(ids)s::text[]) ORDER BY queue

-- name: jobs_lock_by_ids
-- The jobs a heartbeat names, locked in seq order (one order for every locker of many jobs).
SELECT j.seq, j.id, j.tenant_id, j.queue,
       (SELECT t.tenant FROM {schema}.tenants t WHERE t.id = j.tenant_id) AS tenant,
       j.name, j.state, j.payload, j.priority, j.attempts, j.max_attempts, j.lease_timeout,
       j.cost, j.enqueued_at, j.run_at, j.ready_at, j.started_at, j.deadline, j.finished_at,
       j.last_error, j.worker_id, j.leases, j.charged, j.headers, j.cancel_requested,
       j.learn_cost, j.claimed
FROM {schema}.jobs j
WHERE j.id = ANY(%(ids)s::text[])
ORDER BY j.seq
FOR UPDATE

-- name: job_types_upsert
INSERT INTO {schema}.job_types (
    name, queue, tenant_arg, params, max_attempts, lease_timeout, cost, throttle, signature,
    learn_cost
) VALUES (
    %(name)s, %(queue)s, %(tenant_arg)s, %(params)s, %(max_attempts)s, %(lease_timeout)s,
    %(cost)s, %(throttle)s, %(signature)s, %(learn_cost)s
)
ON CONFLICT (name) DO UPDATE SET
    queue = excluded.queue, tenant_arg = excluded.tenant_arg, params = excluded.params,
    max_attempts = excluded.max_attempts, lease_timeout = excluded.lease_timeout,
    cost = excluded.cost, throttle = excluded.throttle, signature = excluded.signature,
    learn_cost = excluded.learn_cost

-- name: job_types_all
SELECT name, queue, tenant_arg, params, max_attempts, lease_timeout, cost, throttle, signature,
       learn_cost
FROM {schema}.job_types
