-- The entry points of a worker's dequeue: one statement, one implicit transaction, one round
-- trip when no maintenance is due (the usual case).
--
-- Durability: a dequeue or ack commits without waiting for its WAL flush (synchronous_commit =
-- off, for that transaction only). The queue lock is held until commit, so waiting for the disk
-- there would make every other worker of the queue wait too. Nothing can be lost by it: if the
-- server crashes before the flush, the job simply is ready (or running) again and runs again,
-- which at-least-once delivery allows. Enqueues, migrations and settings commit durably.
--
-- Queue locks: pg_advisory_xact_lock(hashtextextended(queue, seed)), where the caller passes
-- the schema's seed; queries.sql (lock_queues_*) takes the very same keys.
--
-- Planner settings of the entry points (dequeue, ack_dequeue, and ack, ack_many in acks.sql),
-- which every function they call runs under:
-- * enable_seqscan = off: plpgsql caches one plan per statement per session, made from the
--   statistics of its first call; on the near-empty tables a worker starts beside, a sequential
--   scan looks cheapest and stays in the plan after a flood. Without it, the job lookup of
--   lock_ack_dequeue read 385 buffers a call after a flood of 20,000 jobs, where every
--   statement reads at most 200 with it (tests/postgres/test_cached_plans.py).
-- No plan_cache_mode = force_generic_plan any more (schema 9 set it, as custom plans were made
-- again on many calls): benchmarks/postgres_throughput.py, 20,000 no-op jobs, three alternated
-- runs of each, fairq's server CPU per job 125/128/126 µs with it, 125/125/122 µs without;
-- drain 5,837/4,341/4,759 against 6,045/5,985/5,644 jobs/s.

-- A whole dequeue when no maintenance is due: lock the queues, check that nothing is due
-- (a due scheduled job, an overdue lease, a rate limit that is over, an inbox row), dispatch.
-- When something is due it returns one row with due = true and changes nothing; the caller
-- then runs maintenance in Python and calls dispatch() in the same transaction.
CREATE FUNCTION {schema}.dequeue(
    p_queues text[], p_seed bigint, p_worker text, p_now double precision, p_limit integer
) RETURNS TABLE (
    due boolean, l_id text, l_name text, l_queue text, l_tenant text, l_payload text,
    l_attempts integer, l_leases integer, l_max_attempts integer,
    l_started_at double precision, l_deadline double precision,
    l_lease_timeout double precision, l_cost double precision,
    l_ready_at double precision, l_headers text
) LANGUAGE plpgsql SET enable_seqscan = off AS $$  -- see the top of this file
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see the top of this file
    PERFORM pg_advisory_xact_lock(k)
    FROM (SELECT DISTINCT hashtextextended(n, p_seed) AS k FROM unnest(p_queues) AS n) s
    ORDER BY k;
    p_now := {schema}.event_time(p_now);  -- the locks are held: the event's time (clock.sql)
    IF {schema}.maintenance_due(p_queues, p_now) THEN
        due := true;
        RETURN NEXT;
        RETURN;
    END IF;
    RETURN QUERY SELECT false, d.* FROM {schema}.dispatch(p_queues, p_worker, p_now, p_limit) d;
END
$$;

-- The queue locks of an ack_and_dequeue in one pass, in ascending key order (queries.sql):
-- exclusive for the queues it dequeues from, shared for the other queues of the jobs it acks.
-- Taken in two steps (the acks' shared locks, then the dispatch's exclusive ones) they could
-- wait in a cycle with a dispatch of several queues.
CREATE FUNCTION {schema}.lock_ack_dequeue(p_queues text[], p_ids text[], p_seed bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM CASE WHEN s.exclusive THEN pg_advisory_xact_lock(s.k)
                 ELSE pg_advisory_xact_lock_shared(s.k) END
    FROM (SELECT u.k, bool_or(u.exclusive) AS exclusive
          FROM (SELECT hashtextextended(n, p_seed), true FROM unnest(p_queues) AS n
                UNION ALL
                SELECT hashtextextended(x.queue, p_seed), false
                FROM {schema}.jobs x WHERE x.id = ANY(p_ids)) AS u(k, exclusive)
          GROUP BY u.k) s
    ORDER BY s.k;
END
$$;

-- Whether dequeue must maintain p_queues first: a due scheduled job, an overdue lease, a rate
-- limit that is over, or an inbox row. The caller holds the queues' exclusive locks. In
-- plpgsql so its plan is cached. Each probe reads its index only up to p_now: a
-- job acked since the last vacuum leaves its entry in jobs_running, before the live ones
-- (its lease began earlier), and a probe for the first live entry walked all of them.
CREATE FUNCTION {schema}.maintenance_due(p_queues text[], p_now double precision)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM unnest(p_queues) AS n
        WHERE (SELECT j.run_at FROM {schema}.jobs j
               WHERE j.queue = n AND j.state = 'scheduled' AND j.run_at <= p_now
               ORDER BY j.run_at, j.seq LIMIT 1) IS NOT NULL
           OR (SELECT j.deadline FROM {schema}.jobs j
               WHERE j.queue = n AND j.state = 'running' AND j.deadline <= p_now
               ORDER BY j.deadline, j.seq LIMIT 1) IS NOT NULL
           OR (SELECT t.limited_until FROM {schema}.tenants t
               WHERE t.queue = n AND t.limited_until IS NOT NULL AND t.limited_until <= p_now
               ORDER BY t.limited_until LIMIT 1) IS NOT NULL
           OR (SELECT i.seq FROM {schema}.inbox i
               WHERE i.queue = n ORDER BY i.seq LIMIT 1) IS NOT NULL);
END
$$;

-- ack_many(p_ids, p_leases, p_ack_now) then dequeue(p_queues, …, p_now, p_limit), atomically,
-- in one statement. The first row carries ack_many's statuses; the leases follow, in the order
-- dispatch hands them out. When maintenance is due: one row, due = true, nothing changed.
-- Checking before the acks is exact: an ack never makes maintenance due (it adds no scheduled
-- job, rate limit or inbox row), so "not due" before them is "not due" after them. The acks
-- are ack_held's (acks.sql), told which queues this call holds exclusive.
CREATE FUNCTION {schema}.ack_dequeue(
    p_ids text[], p_leases integer[], p_ack_now double precision, p_queues text[],
    p_worker text, p_now double precision, p_limit integer, p_seed bigint,
    p_channel_salt text
) RETURNS TABLE (
    statuses text[], due boolean, l_id text, l_name text, l_queue text, l_tenant text,
    l_payload text, l_attempts integer, l_leases integer, l_max_attempts integer,
    l_started_at double precision, l_deadline double precision,
    l_lease_timeout double precision, l_cost double precision,
    l_ready_at double precision, l_headers text
) LANGUAGE plpgsql SET enable_seqscan = off AS $$  -- see the top of this file
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see the top of this file
    PERFORM {schema}.lock_ack_dequeue(p_queues, p_ids, p_seed);
    p_now := {schema}.event_time(p_now);  -- the locks are held: the event's time (clock.sql)
    due := {schema}.maintenance_due(p_queues, p_now);
    IF NOT due THEN
        statuses := {schema}.ack_held(p_ids, p_leases, p_ack_now, p_queues, p_channel_salt);
    END IF;
    RETURN NEXT;
    IF NOT due THEN
        RETURN QUERY SELECT NULL::text[], false, d.*
        FROM {schema}.dispatch(p_queues, p_worker, p_now, p_limit) d;
    END IF;
END
$$;
