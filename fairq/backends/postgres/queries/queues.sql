-- Named queries: the queues' rows (settings, V, the count in flight) and the shards' loads.
-- {schema} is replaced by the quoted schema name; queries/locks.sql gives the lock order.

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
