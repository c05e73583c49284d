-- The entry points of a worker's dequeue: one statement, one implicit transaction, one round
-- trip when no maintenance is due (the usual case).
--
-- Durability: a dequeue or ack commits without waiting for its WAL flush (synchronous_commit =
-- off, for that transaction only). Its locks (tenant rows, a capped queue's lock) are held
-- until commit, so waiting for the disk there would make other workers of the queue wait too. Nothing can be lost by it: if the
-- server crashes before the flush, the job simply is ready (or running) again and runs again,
-- which at-least-once delivery allows. Enqueues, migrations and settings commit durably.
--
-- Queue locks: pg_advisory_xact_lock(hashtextextended(queue, seed)), where the caller passes
-- the schema's seed; queries/locks.sql (lock_queues_*) takes the very same keys.
--
-- Planner settings of the entry points (dequeue, ack_dequeue, and ack, ack_many in acks.sql),
-- which every function they call runs under:
-- * enable_seqscan = off: plpgsql caches one plan per statement per session, made from the
--   statistics of its first call; on the near-empty tables a worker starts beside, a sequential
--   scan looks cheapest and stays in the plan after a flood. Without it, the job lookup of
--   lock_ack_dequeue read 385 buffers a call after a flood of 20,000 jobs, where every
--   statement reads at most 200 with it (tests/postgres/test_cached_plans.py).
-- * plan_cache_mode = force_generic_plan: each statement is planned once per session. With
--   the default, a statement that takes arrays or a LIMIT from a variable is planned again on
--   almost every call (its custom plan looks cheaper than the generic one), and at one job per
--   call (a worker with one slot) that planning was most of the server's work: under callgrind
--   (benchmarks/postgres_callgrind.py --limit 1), 9.87 M instructions per job without it, 4.23 M
--   with it. A clean-up (schema 9 -> functions/) dropped it after measuring at batches of 10
--   only, where the planning is shared by ten jobs.

-- The locks of a dispatch (and of the acks before it), in one pass per kind, in ascending key
-- order (queries/locks.sql), before any row:
-- * the queue locks: exclusive for a queue dispatched from that has a cap on its leased jobs
--   (max_in_flight: its room is read and written under that lock, one dispatch at a time, as
--   are its acks' counts), shared for the other queues dispatched from and for the queues of
--   the jobs acked;
-- * the dispatch gate of every other queue dispatched from (key: hashtextextended(queue,
--   seed # 1)): exclusive when no other dispatch holds it (the queue is dispatched alone, in
--   the exact order), else shared, waiting for a dispatch that holds it exclusive (dispatch.sql
--   explains the two ways of reading tenants).
-- alone: the queues dispatched alone (held exclusive, or their gate); exclusive: those held
-- exclusive. Taking the gates after the queue locks and before any row keeps every wait in
-- one order: a dispatch waiting for a gate holds no row.
CREATE FUNCTION {schema}.lock_dispatch(
    p_queues text[], p_ids text[], p_seed bigint, OUT alone text[], OUT exclusive text[]
) LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    SELECT coalesce(array_agg(q.name), ARRAY[]::text[]) INTO exclusive
    FROM {schema}.queues q WHERE q.name = ANY(p_queues) AND q.max_in_flight IS NOT NULL;
    alone := exclusive;
    PERFORM CASE WHEN s.exclusive THEN pg_advisory_xact_lock(s.k)
                 ELSE pg_advisory_xact_lock_shared(s.k) END
    FROM (SELECT u.k, bool_or(u.exclusive) AS exclusive
          FROM (SELECT hashtextextended(n, p_seed), n = ANY(exclusive) FROM unnest(p_queues) AS n
                UNION ALL
                SELECT hashtextextended(x.queue, p_seed), false
                FROM {schema}.jobs x WHERE x.id = ANY(p_ids)) AS u(k, exclusive)
          GROUP BY u.k) s
    ORDER BY s.k;
    FOR r IN
        SELECT g.name, hashtextextended(g.name, p_seed # 1) AS k
        FROM (SELECT DISTINCT n AS name FROM unnest(p_queues) AS n) g
        WHERE g.name <> ALL(exclusive)
        ORDER BY k
    LOOP
        IF pg_try_advisory_xact_lock(r.k) THEN
            alone := alone || r.name;
        ELSE
            PERFORM pg_advisory_xact_lock_shared(r.k);
        END IF;
    END LOOP;
END
$$;

-- Whether a dispatch must go the slow way, under exclusive locks: maintenance is due, or a
-- queue it took shared got a cap on its leased jobs meanwhile (set_queue ran in between).
CREATE FUNCTION {schema}.dispatch_due(
    p_queues text[], p_exclusive text[], p_now double precision
) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN {schema}.maintenance_due(p_queues, p_now) OR EXISTS (
        SELECT 1 FROM {schema}.queues q
        WHERE q.name = ANY(p_queues) AND q.max_in_flight IS NOT NULL
          AND q.name <> ALL(p_exclusive));
END
$$;

-- A call that found every eligible tenant held by others (dispatch.sql: the missed row) is
-- made again with p_wait: first wait until the first eligible tenant of the first queue that
-- has one (else the tenant of its oldest inbox row) is free, without keeping it (the lock is
-- taken in a subtransaction, rolled back), then dispatch as usual. The transaction that held
-- it has committed by then.
CREATE FUNCTION {schema}.wait_for_held(p_queues text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
    v_queue text;
BEGIN
    FOREACH v_queue IN ARRAY p_queues LOOP
        SELECT e.id INTO v_id FROM {schema}.tenants e
        WHERE e.queue = v_queue AND e.start_tag IS NOT NULL
        ORDER BY e.start_tag, e.head_seq
        LIMIT 1;
        IF v_id IS NULL THEN
            SELECT t.id INTO v_id
            FROM (SELECT i.tenant, i.tenant_key FROM {schema}.inbox i
                  WHERE i.queue = v_queue ORDER BY i.seq LIMIT 1) i
            JOIN {schema}.tenants t
              ON t.queue = v_queue AND t.tenant_key = i.tenant_key AND t.tenant = i.tenant;
        END IF;
        EXIT WHEN v_id IS NOT NULL;
    END LOOP;
    IF v_id IS NULL THEN
        RETURN;
    END IF;
    BEGIN
        PERFORM 1 FROM {schema}.tenants WHERE id = v_id FOR UPDATE;
        RAISE EXCEPTION USING ERRCODE = 'FQ001';  -- let it go again
    EXCEPTION WHEN SQLSTATE 'FQ001' THEN
        NULL;
    END;
END
$$;

-- A whole dequeue when no maintenance is due: the locks (lock_dispatch), the check that
-- nothing is due (a due scheduled job, an overdue lease, a rate limit that is over),
-- dispatch. When something is due it returns one row with due = true and changes
-- nothing; the caller then runs maintenance in Python and calls dispatch() in the same
-- transaction, under exclusive locks. p_wait: see wait_for_held. p_hold: the relay's
-- dequeue, its jobs handed out unclaimed (dispatch.sql).
CREATE FUNCTION {schema}.dequeue(
    p_queues text[], p_seed bigint, p_worker text, p_now double precision, p_limit integer,
    p_wait boolean, p_hold double precision DEFAULT NULL
) RETURNS TABLE (
    due boolean, l_id text, l_name text, l_queue text, l_tenant text, l_payload text,
    l_attempts integer, l_leases integer, l_max_attempts integer,
    l_started_at double precision, l_deadline double precision,
    l_lease_timeout double precision, l_cost double precision,
    l_ready_at double precision, l_headers text
) LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$  -- see the top of this file
DECLARE
    v_locks record;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see the top of this file
    v_locks := {schema}.lock_dispatch(p_queues, ARRAY[]::text[], p_seed);
    p_now := {schema}.event_time(p_now);  -- the locks are held: the event's time (clock.sql)
    IF {schema}.dispatch_due(p_queues, v_locks.exclusive, p_now) THEN
        due := true;
        RETURN NEXT;
        RETURN;
    END IF;
    IF p_wait THEN
        PERFORM {schema}.wait_for_held(p_queues);
    END IF;
    RETURN QUERY SELECT false, d.*
    FROM {schema}.dispatch(p_queues, p_worker, p_now, p_limit, v_locks.alone, NULL, p_hold) d;
END
$$;

-- The queue locks of ack_and_dequeue's slow path, in one pass in ascending key order
-- (queries/locks.sql): exclusive for the queues it dequeues from, shared for the other
-- queues of the jobs it acks. Taken in two steps (the acks' shared locks, then the dispatch's exclusive ones)
-- they could wait in a cycle with a dispatch of several queues.
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

-- Whether dequeue must maintain p_queues first: a due scheduled job, an overdue lease, or a
-- rate limit that is over (inbox rows are taken in by dispatch itself). In
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
               ORDER BY t.limited_until LIMIT 1) IS NOT NULL);
END
$$;

-- ack_many(p_ids, p_leases, p_ack_now) then dequeue(p_queues, …, p_now, p_limit), atomically,
-- in one statement. The first row carries ack_many's statuses; the leases follow, in the order
-- dispatch hands them out. When maintenance is due: one row, due = true, nothing changed.
-- Checking before the acks is exact: an ack never makes maintenance due (it adds no scheduled
-- job or rate limit), so "not due" before them is "not due" after them. The acks
-- are ack_held's (acks.sql), told which queues this call holds exclusive; the tenant rows of
-- the queues it dispatches from are left to dispatch to write, each once (dispatch.sql).
CREATE FUNCTION {schema}.ack_dequeue(
    p_ids text[], p_leases integer[], p_ack_now double precision, p_queues text[],
    p_worker text, p_now double precision, p_limit integer, p_seed bigint,
    p_channel_salt text, p_hold double precision DEFAULT NULL
) RETURNS TABLE (
    statuses text[], due boolean, l_id text, l_name text, l_queue text, l_tenant text,
    l_payload text, l_attempts integer, l_leases integer, l_max_attempts integer,
    l_started_at double precision, l_deadline double precision,
    l_lease_timeout double precision, l_cost double precision,
    l_ready_at double precision, l_headers text
) LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$  -- see the top of this file
DECLARE
    v_locks record;
    v_acked record;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see the top of this file
    v_locks := {schema}.lock_dispatch(p_queues, p_ids, p_seed);
    p_now := {schema}.event_time(p_now);  -- the locks are held: the event's time (clock.sql)
    due := {schema}.dispatch_due(p_queues, v_locks.exclusive, p_now);
    IF NOT due THEN
        v_acked := {schema}.ack_held(
            p_ids, p_leases, p_ack_now, v_locks.exclusive, p_channel_salt, p_queues);
        statuses := v_acked.statuses;
        -- the runs it starts start once the acks' runs ended (their slots): the acks took
        -- their own time, later than p_now (ack_held), so the dispatch takes the time again
        p_now := {schema}.event_time(p_now);
    END IF;
    RETURN NEXT;
    IF NOT due THEN
        RETURN QUERY SELECT NULL::text[], false, d.*
        FROM {schema}.dispatch(
            p_queues, p_worker, p_now, p_limit, v_locks.alone, v_acked.pending, p_hold) d;
    END IF;
END
$$;
