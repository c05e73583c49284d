-- A queue's recorded jobs (fairq/backends/postgres/history.py): plain SELECTs, one page each.
-- A job lives in one of three tables in turn: inbox (enqueued, not yet taken in), jobs
-- (waiting, running, dead) and succeeded_jobs (succeeded, cancelled); each is read in its
-- primary key's order from after the cursor, rows of other queues and times passed over.

-- name: history_inbox
SELECT id, name, tenant, 'ready' AS state, priority, 0 AS attempts, cost,
       enqueued_at, run_at, NULL::double precision AS started_at,
       NULL::double precision AS finished_at, seq::text AS key
FROM {schema}.inbox
WHERE queue = %(queue)s AND seq > %(after)s::bigint
  AND enqueued_at >= %(since)s AND enqueued_at < %(until)s
ORDER BY seq
LIMIT %(limit)s

-- name: history_jobs
SELECT j.id, j.name, t.tenant, j.state, j.priority, j.attempts, j.cost,
       j.enqueued_at, j.run_at, j.started_at, j.finished_at, j.seq::text AS key
FROM {schema}.jobs j JOIN {schema}.tenants t ON t.id = j.tenant_id
WHERE j.seq > %(after)s::bigint AND j.queue = %(queue)s
  AND j.enqueued_at >= %(since)s AND j.enqueued_at < %(until)s
ORDER BY j.seq
LIMIT %(limit)s

-- name: history_succeeded
-- The queue of a succeeded job is its tenant row's (schema.sql); its declared cost is not
-- kept (its run time is what a replay uses), so 0.
SELECT s.id, s.name, t.tenant, s.state, s.priority, s.attempts, 0.0::double precision AS cost,
       s.enqueued_at, s.run_at, s.started_at, s.finished_at, s.id AS key
FROM {schema}.succeeded_jobs s JOIN {schema}.tenants t ON t.id = s.tenant_id
WHERE s.id > %(after_id)s AND t.queue = %(queue)s
  AND s.enqueued_at >= %(since)s AND s.enqueued_at < %(until)s
ORDER BY s.id
LIMIT %(limit)s
