-- Named queries of the PostgreSQL backend, one file per step (sql.py reads every file of
-- queries/; a name is unique across them). {schema} is replaced by the quoted schema name.
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
