setting AS (
    SELECT coalesce(%(limit)s::integer,
                    CASE WHEN t.id IS NOT NULL THEN t.max_running ELSE q.max_running END) AS cap
    FROM (SELECT 1) one
    LEFT JOIN {schema}.tenants t
        ON t.queue = %(queue)s AND t.tenant_key = %(key)s AND t.tenant = %(tenant)s
    LEFT JOIN {schema}.queues q ON q.name = %(queue)s
),
-- Named queries of the PostgreSQL backend. {schema} is replaced by the quoted schema name.
--
-- Locking, in one order everywhere (so no two transactions wait on each other in a cycle):
--   1. the queue lock: a transaction-scoped advisory lock per (schema, queue). Maintenance,
--      set_queue and the dispatch of a queue with a cap on its leased jobs take it exclusive
--      (they touch many tenants, or the queue's room); every other event takes it shared:
--      dispatch, enqueue, ack, fail, release, set_tenant, requeue. Keys in ascending order.
--   2. a dispatch's gate (functions/dequeue.sql: lock_dispatch), before any row.
--   3. job rows (FOR UPDATE), 4. tenant rows, in ascending id order for those that wait for
--      them (acks, fail, heartbeat, maintenance); dispatch and enqueue never wait for a tenant
--      (FOR UPDATE SKIP LOCKED: functions/dispatch.sql, enqueue.sql), 5. queue rows, in name
--      order, last.
-- Job states are literals, never parameters, so the partial indexes (WHERE state = '…') apply.
-- tests/postgres/test_query_plans.py EXPLAINs every hot-path block and fails on a scan.

-- name: lock_queues_exclusive
-- Maintenance and set_queue move many tenants (and dequeue's slow path dispatches after
-- maintenance): nothing else of the queue may run meanwhile. Returns the event's time once the
-- locks are held (functions/clock.sql): the aggregate reads every lock before the outer row is
-- made.
SELECT {schema}.event_time(%(now)s) AS now
FROM (SELECT count(*) FROM (
          SELECT pg_advisory_xact_lock(k)
          FROM (SELECT DISTINCT hashtextextended(n, %(seed)s) AS k
                FROM unnest(%(names)s::text[]) AS n) s
          ORDER BY k) locks) locked

-- name: lock_queues_shared
-- Every other event may run together: they wait only for maintenance, set_queue and a capped
-- queue's dispatch.
-- Returns the event's time once the locks are held, as lock_queues_exclusive.
SELECT {schema}.event_time(%(now)s) AS now
FROM (SELECT count(*) FROM (
          SELECT pg_advisory_xact_lock_shared(k)
          FROM (SELECT DISTINCT hashtextextended(n, %(seed)s) AS k
                FROM unnest(%(names)s::text[]) AS n) s
          ORDER BY k) locks) locked

-- name: event_time
-- The event's time for an event that takes no queue lock (functions/clock.sql).
SELECT {schema}.event_time(%(now)s) AS now

-- name: queue_ensure
INSERT INTO {schema}.queues (name) VALUES (%(name)s) ON CONFLICT (name) DO NOTHING

-- name: queue_get
SELECT name, weight, max_running, vclock, rate_count, rate_period, rate_burst, half_life,
       max_debt, max_in_flight, in_flight
FROM {schema}.queues WHERE name = %(name)s

-- name: queues_dispatch_state
-- Read after the queue locks are held (a new snapshot): V and whether maintenance has work.
-- Each test reads one index from its queue's first entry up to now (ORDER BY … LIMIT 1),
-- which the planner cannot turn into a hashed scan of jobs the way it may turn an EXISTS; up
-- to now, so that it stops at the first entry due later, dead or not (maintenance_due in
-- schema.sql). A queue known only to the inbox (its first jobs came in a caller's
-- transaction) has no row yet: defaults until then.
SELECT n.name, coalesce(q.vclock, 0.0) AS vclock, q.half_life,
       coalesce(q.max_debt, 60.0) AS max_debt, q.max_in_flight,
       (SELECT j.run_at FROM {schema}.jobs j
        WHERE j.queue = n.name AND j.state = 'scheduled' AND j.run_at <= %(now)s
        ORDER BY j.run_at, j.seq LIMIT 1) IS NOT NULL AS promote_due,
       (SELECT j.deadline FROM {schema}.jobs j
        WHERE j.queue = n.name AND j.state = 'running' AND j.deadline <= %(now)s
        ORDER BY j.deadline, j.seq LIMIT 1) IS NOT NULL AS expire_due,
       (SELECT t.limited_until FROM {schema}.tenants t
        WHERE t.queue = n.name AND t.limited_until IS NOT NULL
          AND t.limited_until <= %(now)s
        ORDER BY t.limited_until LIMIT 1) IS NOT NULL AS unlimit_due,
       (SELECT i.seq FROM {schema}.inbox i
        WHERE i.queue = n.name ORDER BY i.seq LIMIT 1) IS NOT NULL AS inbox_due
FROM (SELECT DISTINCT unnest(%(names)s::text[]) AS name) n
LEFT JOIN {schema}.queues q ON q.name = n.name

-- name: queue_set_vclock
UPDATE {schema}.queues SET vclock = %(vclock)s WHERE name = %(name)s

-- name: queue_set_defaults
-- Under the queue's exclusive lock. A capped queue's in_flight is counted again from its
-- running jobs (admin path: a range of jobs_running), so a count is never carried over from
-- a time it was not kept.
INSERT INTO {schema}.queues AS q (
    name, weight, max_running, rate_count, rate_period, rate_burst, half_life, max_debt,
    max_in_flight, in_flight
) VALUES (
    %(name)s, %(weight)s, %(max_running)s, %(rate_count)s, %(rate_period)s, %(rate_burst)s,
    %(half_life)s, %(max_debt)s, %(max_in_flight)s,
    CASE WHEN %(max_in_flight)s::integer IS NULL THEN 0 ELSE (
        SELECT count(*) FROM {schema}.jobs j WHERE j.queue = %(name)s AND j.state = 'running'
    ) END
)
ON CONFLICT (name) DO UPDATE SET
    weight = excluded.weight, max_running = excluded.max_running,
    rate_count = excluded.rate_count, rate_period = excluded.rate_period,
    rate_burst = excluded.rate_burst, half_life = excluded.half_life,
    max_debt = excluded.max_debt, max_in_flight = excluded.max_in_flight,
    in_flight = excluded.in_flight
RETURNING q.max_in_flight, q.in_flight

-- name: queue_end_runs
-- Leases of a capped queue ended (fail, release, expiry; acks do it in acks.sql): the count
-- goes down. Only a capped queue's row is written: the caller checks max_in_flight first.
UPDATE {schema}.queues SET in_flight = in_flight - %(ended)s
WHERE name = %(name)s AND max_in_flight IS NOT NULL
RETURNING max_in_flight, in_flight

-- name: queue_names
SELECT name FROM {schema}.queues ORDER BY name

-- name: shard_loads
-- The candidate shards of a sharded job, in the order given, as fairq.policy.shards.least_loaded
-- weighs them: each one's other eligible tenants (a range of tenants_eligible, counted up to
-- %(most)s, so the count stays cheap however many wait there) and the tenant's own ready jobs
-- there (0 when it has no row yet).
SELECT c.queue,
       (SELECT count(*) FROM (
            SELECT 1 FROM {schema}.tenants e
            WHERE e.queue = c.queue COLLATE "C" AND e.start_tag IS NOT NULL
              AND NOT (e.tenant_key = %(key)s AND e.tenant = %(tenant)s)
            ORDER BY e.start_tag  -- the index's order: a range of it, never a table scan
            LIMIT %(most)s) counted) AS others,
       coalesce((SELECT t.ready FROM {schema}.tenants t
                 WHERE t.queue = c.queue COLLATE "C" AND t.tenant_key = %(key)s
                   AND t.tenant = %(tenant)s), 0) AS ready
FROM unnest(%(queues)s::text[]) WITH ORDINALITY AS c(queue, ord)
ORDER BY c.ord

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

-- name: enqueue
-- Every enqueue, in one statement (functions/enqueue.sql; enqueueing.py builds the arguments and
-- reads the reply). The jobs come as one JSON text: any batch is one parameter to send.
SELECT {schema}.enqueue(
    %(jobs)s::json, %(now)s::double precision, %(seed)s::bigint, %(salt)s::text,
    %(inbox)s::boolean
) AS queues

-- name: take_in
-- Maintenance: every inbox row of one queue (functions/enqueue.sql: take_in); the caller holds
-- the queue's exclusive lock. Returns how many jobs came in.
SELECT {schema}.take_in(ARRAY[%(queue)s::text], NULL, %(now)s::double precision, NULL) AS taken

-- name: inbox_queues
SELECT DISTINCT queue FROM {schema}.inbox

-- name: inbox_by_ids
SELECT seq, id, queue, tenant, name, payload, priority, max_attempts, lease_timeout, cost,
       enqueued_at, run_at, headers
FROM {schema}.inbox
WHERE id = ANY(%(ids)s::text[])

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

-- name: throttle_windows_ensure
-- Record + decide, step 1: a row for every (job name, tenant) of the enqueue, created in key
-- order (so concurrent enqueues never wait in a cycle) and then locked by throttle_windows_lock.
-- These row locks are taken before any queue lock: maintenance never waits for them (its
-- prune skips locked rows), so the order stays free of cycles.
INSERT INTO {schema}.throttle_windows (key, name, tenant, times, span, last_at, expires_at)
SELECT n.key, n.name, n.tenant, '{}', 0.0, '-Infinity', '-Infinity'
FROM unnest(%(keys)s::bytea[], %(names)s::text[], %(tenants)s::text[])
         WITH ORDINALITY AS n(key, name, tenant, ord)
ORDER BY n.ord
ON CONFLICT (key) DO NOTHING

-- name: throttle_windows_lock
SELECT key, name, tenant, times, span FROM {schema}.throttle_windows
WHERE key = ANY(%(keys)s::bytea[])
ORDER BY key
FOR UPDATE

-- name: throttle_window_save
-- times holds at most max threshold + 1 values (fairq/policy/throttle.py: window_size).
UPDATE {schema}.throttle_windows
SET times = %(times)s::double precision[], span = %(span)s, last_at = %(last_at)s,
    expires_at = %(last_at)s::double precision + %(span)s::double precision
WHERE key = %(key)s

-- name: throttle_windows_get
SELECT key, name, tenant, times, span FROM {schema}.throttle_windows
WHERE key = ANY(%(keys)s::bytea[])

-- name: throttle_windows_prune
-- Windows whose every time is older than their span: they can match no rule any more. Rows an
-- enqueue holds are skipped (never waited for), so a prune never deadlocks with an enqueue.
DELETE FROM {schema}.throttle_windows
WHERE key IN (SELECT w.key FROM {schema}.throttle_windows w
              WHERE w.expires_at < %(now)s
                AND w.last_at < %(now)s::double precision - w.span
              ORDER BY w.expires_at
              LIMIT %(limit)s
              FOR UPDATE SKIP LOCKED)

-- name: slots_lock
-- Tenant slots: acquire, renew and release of a (queue, tenant) take turns on an advisory lock
-- of its own (slots.py: lock_key), all of a call's in key order, before any slot row: a count
-- and the insert after it are then one step, and a renew racing an acquire is ordered with
-- it. Returns the event's time once the locks are held (functions/clock.sql).
SELECT {schema}.event_time(%(now)s) AS now
FROM (SELECT count(*) FROM (
          SELECT pg_advisory_xact_lock(k)
          FROM (SELECT DISTINCT unnest(%(keys)s::bigint[]) AS k) s
          ORDER BY k) locks) locked

-- name: slot_acquire
-- Under the (queue, tenant)'s lock (slots_lock, an earlier statement, so this one's snapshot
-- sees every slot taken before): drop its expired slots, count the rest, and take one when
-- fewer than the cap are held. The cap: %(limit)s, else the tenant row's effective
-- max_running, else the queue's default, else none. Returns the new slot's deadline (NULL:
-- refused) and the earliest deadline held.
WITH expired AS (
    DELETE FROM {schema}.slots
    WHERE queue = %(queue)s AND tenant_key = %(key)s AND deadline <= %(now)s
),
held AS (
    SELECT count(*) AS held, min(deadline) AS free_at FROM {schema}.slots
    WHERE queue = %(queue)s AND tenant_key = %(key)s AND tenant = %(tenant)s
      AND deadline > %(now)s
),
setting AS (
    SELECT coalesce(%(limit)s::integer, (
        SELECT s.max_running FROM (
            SELECT t.max_running, 1 AS own FROM {schema}.tenants t
            WHERE t.queue = %(queue)s AND t.tenant_key = %(key)s AND t.tenant = %(tenant)s
            UNION ALL
            SELECT q.max_running, 0 AS own FROM {schema}.queues q WHERE q.name = %(queue)s
            ORDER BY own DESC LIMIT 1) s)) AS cap
),
taken AS (
    INSERT INTO {schema}.slots (nonce, queue, tenant, tenant_key, holder, lease, deadline)
    SELECT %(nonce)s, %(queue)s, %(tenant)s, %(key)s, %(holder)s, %(lease)s,
           %(now)s::double precision + %(lease)s::double precision
    FROM held, setting
    WHERE setting.cap IS NULL OR held.held < setting.cap
    RETURNING deadline
)
SELECT (SELECT deadline FROM taken) AS deadline, held.free_at FROM held

-- name: slots_get
-- The slots of a renew or release (their (queue, tenant) locks held), locked.
SELECT nonce, queue, tenant, lease, deadline FROM {schema}.slots
WHERE nonce = ANY(%(nonces)s::text[])
ORDER BY nonce
FOR UPDATE

-- name: slots_renew
UPDATE {schema}.slots s SET deadline = n.deadline
FROM unnest(%(nonces)s::text[], %(deadlines)s::double precision[]) AS n(nonce, deadline)
WHERE s.nonce = n.nonce

-- name: slots_delete
DELETE FROM {schema}.slots WHERE nonce = ANY(%(nonces)s::text[])

-- name: waiter_get
-- Under the (queue, tenant)'s lock (slots_lock), as every statement on slot_waiters.
SELECT place FROM {schema}.slot_waiters
WHERE place = %(place)s AND queue = %(queue)s AND tenant = %(tenant)s

-- name: waiter_park
-- Park a job refused a slot, or park a copy again: wakeable, its place in line kept.
INSERT INTO {schema}.slot_waiters (place, queue, tenant, tenant_key, since, park, woken, touched)
VALUES (%(place)s, %(queue)s, %(tenant)s, %(key)s, %(now)s, %(park)s, false, %(now)s)
ON CONFLICT (place) DO UPDATE SET park = excluded.park, woken = false, touched = excluded.touched

-- name: waiter_delete
DELETE FROM {schema}.slot_waiters WHERE place = %(place)s

-- name: waiter_wake
-- A release hands out the oldest wakeable parked job of its (queue, tenant) (slot_waiters_line).
UPDATE {schema}.slot_waiters SET woken = true, touched = %(now)s
WHERE place = (SELECT place FROM {schema}.slot_waiters
               WHERE queue = %(queue)s AND tenant_key = %(key)s AND tenant = %(tenant)s
                 AND NOT woken
               ORDER BY since, place LIMIT 1)
RETURNING place, park

-- name: waiters_prune
-- Maintenance: lines nobody came back to for PARK_TTL (a timed copy touches its row).
DELETE FROM {schema}.slot_waiters WHERE touched <= %(before)s

-- name: slots_prune
-- Maintenance: expired slots, found through slots_deadline; rows another call holds are
-- skipped (never waited for), the rest go next time.
DELETE FROM {schema}.slots
WHERE nonce = ANY(ARRAY(SELECT s.nonce FROM {schema}.slots s
                        WHERE s.deadline <= %(now)s
                        ORDER BY s.deadline
                        LIMIT %(limit)s
                        FOR UPDATE SKIP LOCKED))

-- name: dequeue
-- A whole dequeue in one statement when no maintenance is due (functions/dequeue.sql).
SELECT * FROM {schema}.dequeue(
    %(queues)s::text[], %(seed)s, %(worker)s, %(now)s, %(limit)s, %(wait)s,
    %(hold)s::double precision)

-- name: dispatch
-- Dispatch only; the caller holds the exclusive queue locks and has run maintenance: every
-- queue is dispatched alone (functions/dispatch.sql).
SELECT * FROM {schema}.dispatch(
    %(queues)s::text[], %(worker)s, %(now)s, %(limit)s, %(queues)s::text[], NULL,
    %(hold)s::double precision)

-- name: ack_many
SELECT {schema}.ack_many(
    %(ids)s::text[], %(leases)s::integer[], %(now)s, %(seed)s, %(salt)s
) AS statuses

-- name: ack_and_dequeue
-- ack_many then dequeue in one statement when no maintenance is due (functions/dequeue.sql).
SELECT * FROM {schema}.ack_dequeue(
    %(ids)s::text[], %(leases)s::integer[], %(ack_now)s, %(queues)s::text[], %(worker)s,
    %(now)s, %(limit)s, %(seed)s, %(salt)s, %(hold)s::double precision
)

-- name: lock_ack_dequeue
-- An ack_and_dequeue's queue locks, in one pass in key order: exclusive for the queues it
-- dequeues from, shared for the other queues of the jobs it acks.
SELECT {schema}.lock_ack_dequeue(%(queues)s::text[], %(ids)s::text[], %(seed)s)

-- name: notify
-- Delivered when the transaction commits; identical notifications in one transaction merge.
SELECT pg_notify(%(channel)s, '')

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
