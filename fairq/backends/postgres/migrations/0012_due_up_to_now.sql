-- fairq PostgreSQL schema, version 12: the "is maintenance due" check reads each index only
-- up to now.
--
-- Every dequeue first checks whether maintenance is due: a scheduled job whose time has come,
-- a lease past its deadline, a rate limit that is over, an inbox row. The lease test read the
-- first entry of jobs_running for the queue. A job acked since the last vacuum leaves its
-- entry there, and its lease began before those of the jobs still running, so the probe
-- stepped over every job acked since then, looking each one up in jobs until it was marked
-- dead: in a flood with autovacuum off (or slower than the acks) the probe grew with every
-- job acked. Now each probe asks for an entry at or before now, so it stops at the first
-- entry due later, dead or not. dequeue calls maintenance_due instead of repeating its test.

-- A whole dequeue when no maintenance is due: lock the queues, check that nothing is due
-- (a due scheduled job, an overdue lease, a rate limit that is over, an inbox row), dispatch.
-- When something is due it returns one row with due = true and changes nothing; the caller
-- then runs maintenance in Python and calls dispatch() in the same transaction.
CREATE OR REPLACE FUNCTION {schema}.dequeue(
    p_queues text[], p_seed bigint, p_worker text, p_now double precision, p_limit integer
) RETURNS TABLE (
    due boolean, l_id text, l_name text, l_queue text, l_tenant text, l_payload text,
    l_attempts integer, l_leases integer, l_max_attempts integer,
    l_started_at double precision, l_deadline double precision,
    l_lease_timeout double precision, l_cost double precision
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan
    SET enable_seqscan = off AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see 0003_hot_paths.sql
    PERFORM pg_advisory_xact_lock(k)
    FROM (SELECT DISTINCT hashtextextended(n, p_seed) AS k FROM unnest(p_queues) AS n) s
    ORDER BY k;
    IF {schema}.maintenance_due(p_queues, p_now) THEN
        due := true;
        RETURN NEXT;
        RETURN;
    END IF;
    RETURN QUERY SELECT false, d.* FROM {schema}.dispatch(p_queues, p_worker, p_now, p_limit) d;
END
$$;

-- Whether dequeue must maintain p_queues first: a due scheduled job, an overdue lease, a rate
-- limit that is over, or an inbox row. The caller holds the queues' exclusive locks. In
-- plpgsql so its plan is cached. Each probe reads its index only up to p_now (schema 12): a
-- job acked since the last vacuum leaves its entry in jobs_running, before the live ones
-- (its lease began earlier), and a probe for the first live entry walked all of them.
CREATE OR REPLACE FUNCTION {schema}.maintenance_due(p_queues text[], p_now double precision)
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
