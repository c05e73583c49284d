-- fairq PostgreSQL schema, version 9: a busy worker's acks and its next dequeue in one
-- statement (Backend.ack_and_dequeue).
--
-- A worker whose jobs finish stores them and fills the slots they free at once. As ack_many
-- then dequeue that was two statements, two round trips and two transactions (two commit
-- records), and another worker's dispatch could come between them. ack_dequeue does both in
-- one implicit transaction: the queue locks first, in key order, then the check that no
-- maintenance is due, the acks, and dispatch. When maintenance is due it changes nothing and
-- says so; the caller then does the same steps with maintenance in one explicit transaction
-- (backend.py), as dequeue does.

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
-- limit that is over, or an inbox row. The caller holds the queues' exclusive locks. The
-- same test as dequeue's (0006_lean_hot_paths.sql); in plpgsql so its plan is cached.
CREATE FUNCTION {schema}.maintenance_due(p_queues text[], p_now double precision)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM unnest(p_queues) AS n
        WHERE (SELECT j.run_at FROM {schema}.jobs j
               WHERE j.queue = n AND j.state = 'scheduled'
               ORDER BY j.run_at, j.seq LIMIT 1) <= p_now
           OR (SELECT j.deadline FROM {schema}.jobs j
               WHERE j.queue = n AND j.state = 'running'
               ORDER BY j.deadline, j.seq LIMIT 1) <= p_now
           OR (SELECT t.limited_until FROM {schema}.tenants t
               WHERE t.queue = n AND t.limited_until IS NOT NULL
               ORDER BY t.limited_until LIMIT 1) <= p_now
           OR (SELECT i.seq FROM {schema}.inbox i
               WHERE i.queue = n ORDER BY i.seq LIMIT 1) IS NOT NULL);
END
$$;

-- ack_many(p_ids, p_leases, p_ack_now) then dequeue(p_queues, …, p_now, p_limit), atomically,
-- in one statement. The first row carries ack_many's statuses; the leases follow, in the order
-- dispatch hands them out. When maintenance is due: one row, due = true, nothing changed.
-- Checking before the acks is exact: an ack never makes maintenance due (it adds no scheduled
-- job, rate limit or inbox row), so "not due" before them is "not due" after them.
CREATE FUNCTION {schema}.ack_dequeue(
    p_ids text[], p_leases integer[], p_ack_now double precision, p_queues text[],
    p_worker text, p_now double precision, p_limit integer, p_seed bigint,
    p_channel_salt text
) RETURNS TABLE (
    statuses text[], due boolean, l_id text, l_name text, l_queue text, l_tenant text,
    l_payload text, l_attempts integer, l_leases integer, l_max_attempts integer,
    l_started_at double precision, l_deadline double precision,
    l_lease_timeout double precision, l_cost double precision
) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see 0003_hot_paths.sql
    PERFORM {schema}.lock_ack_dequeue(p_queues, p_ids, p_seed);
    due := {schema}.maintenance_due(p_queues, p_now);
    IF NOT due THEN
        statuses := {schema}.ack_many(p_ids, p_leases, p_ack_now, p_seed, p_channel_salt);
    END IF;
    RETURN NEXT;
    IF NOT due THEN
        RETURN QUERY SELECT NULL::text[], false, d.*
        FROM {schema}.dispatch(p_queues, p_worker, p_now, p_limit) d;
    END IF;
END
$$;
