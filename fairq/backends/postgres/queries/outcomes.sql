-- Queries of kept results, cancellation and unique keys (results.py, kept.py, cancelling.py,
-- unique.py).

-- name: results_keep
-- The results an ack keeps (fairq/results.py), in its transaction, for the ids it acked:
-- each until its job's finished_at (the ack's time) + its seconds.
UPDATE {schema}.succeeded_jobs s
SET result = r.value, result_until = s.finished_at + r.keep
FROM unnest(%(ids)s::text[], %(values)s::text[], %(keeps)s::double precision[])
    AS r(id, value, keep)
WHERE s.id = r.id

-- name: cancel_queues
-- The queues of the jobs a cancel names (jobs, and the inbox), whose locks it takes first.
SELECT DISTINCT queue FROM (
    SELECT queue FROM {schema}.jobs WHERE id = ANY(%(ids)s::text[])
    UNION ALL
    SELECT queue FROM {schema}.inbox WHERE id = ANY(%(ids)s::text[])
) found
ORDER BY queue

-- name: inbox_cancel
-- Jobs a cancel finds still in the inbox (committed, not yet taken in: never counted in their
-- tenant), taken out; the caller holds their queues' exclusive locks, so nothing takes them in.
DELETE FROM {schema}.inbox WHERE id = ANY(%(ids)s::text[])
RETURNING seq, id, queue, tenant, name, payload, priority, max_attempts, enqueued_at, run_at,
          headers

-- name: job_request_cancel
-- A running job is asked to stop (fairq/cancel.py); its heartbeat reports it.
UPDATE {schema}.jobs SET cancel_requested = %(now)s
WHERE seq = %(seq)s AND cancel_requested IS NULL

-- name: job_finish_cancelled
-- A job that ends cancelled moves to succeeded_jobs (finished: the retention prunes it).
WITH moved AS (
    DELETE FROM {schema}.jobs WHERE seq = %(seq)s
    RETURNING id, seq, tenant_id, priority, max_attempts, enqueued_at, run_at, name, payload,
              ready_at, headers
)
INSERT INTO {schema}.succeeded_jobs (
    id, seq, tenant_id, priority, attempts, max_attempts, enqueued_at, run_at, started_at,
    finished_at, name, payload, last_error, ready_at, headers, state)
SELECT m.id, m.seq, m.tenant_id, m.priority, %(attempts)s, m.max_attempts, m.enqueued_at,
       m.run_at, %(started_at)s, %(finished_at)s, m.name, m.payload, %(last_error)s,
       m.ready_at, m.headers, 'cancelled'
FROM moved m

-- name: inbox_job_cancelled
-- A job cancelled in the inbox, stored as a cancelled job of its tenant.
INSERT INTO {schema}.succeeded_jobs (
    id, seq, tenant_id, priority, attempts, max_attempts, enqueued_at, run_at, started_at,
    finished_at, name, payload, last_error, ready_at, headers, state)
VALUES (%(id)s, %(seq)s, %(tenant_id)s, %(priority)s, 0, %(max_attempts)s, %(enqueued_at)s,
        %(run_at)s, NULL, %(finished_at)s, %(name)s, %(payload)s, %(last_error)s, NULL,
        %(headers)s, 'cancelled')

-- name: tenant_count_cancelled
-- A tenant's jobs just cancelled: counted (lifetime), and kept until pruned (as succeeded ones).
UPDATE {schema}.tenants SET cancelled = cancelled + %(n)s, kept = kept + %(n)s
WHERE id = %(id)s
-- name: unique_claim
-- The jobs of a batch whose unique key is held, the others taking theirs (functions/unique.sql).
SELECT pos, held_by, held_queue FROM {schema}.unique_claim(
    %(queues)s, %(tenants)s, %(keys)s, %(ids)s, %(job_queues)s, %(windows)s, %(holds)s, %(now)s
)

-- name: unique_prune
SELECT {schema}.unique_prune(%(now)s, %(limit)s) AS pruned
