-- Named queries: the worker's entry points into the server-side functions
-- (functions/dequeue.sql, dispatch.sql, acks.sql).
-- {schema} is replaced by the quoted schema name; queries/locks.sql gives the lock order.

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
