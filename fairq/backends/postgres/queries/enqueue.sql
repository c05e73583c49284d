-- Named queries of enqueue and the inbox (functions/enqueue.sql does the work).
-- {schema} is replaced by the quoted schema name; queries/locks.sql gives the lock order.

-- name: enqueue
-- Every enqueue, in one statement (functions/enqueue.sql; producing.py builds the arguments and
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
