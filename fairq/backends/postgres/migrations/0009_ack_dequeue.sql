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
--
-- Less server work per job on that path (dequeue + ack):
-- * ack_many moves its jobs into succeeded_jobs set-wise: one statement locks the jobs named
--   (in seq order) and finds each token's status, one moves every acked job (it was a
--   statement per job). Its body is ack_held, which ack_dequeue calls under its own locks.
--   (The acked jobs' queues stay an array joined to queues: read through the tenant row
--   instead, a subquery argument stops the planner inlining decayed, a call per tenant.)
-- * The hot entry points plan their statements once per session (plan_cache_mode =
--   force_generic_plan): with array parameters the plan cache kept choosing a custom plan,
--   planning most statements again on every call.

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
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see 0003_hot_paths.sql
    PERFORM {schema}.lock_ack_dequeue(p_queues, p_ids, p_seed);
    due := {schema}.maintenance_due(p_queues, p_now);
    IF NOT due THEN
        statuses := {schema}.ack_held(p_ids, p_leases, p_ack_now, p_channel_salt);
    END IF;
    RETURN NEXT;
    IF NOT due THEN
        RETURN QUERY SELECT NULL::text[], false, d.*
        FROM {schema}.dispatch(p_queues, p_worker, p_now, p_limit) d;
    END IF;
END
$$;

-- Acks of several leases, exactly as acking each (id, lease) in the order given: one status
-- per pair, 'ok', 'not_found' (unknown, not running, another lease, or acked earlier in the
-- batch) or 'expired'; nothing changes for a lease that is not 'ok'. The caller holds the
-- queues' locks (shared or exclusive). Locks in the order of queries.sql: the jobs by seq,
-- then their tenants by id. NOTIFYs a queue when a freed slot makes a capped tenant with
-- ready jobs eligible again.
CREATE FUNCTION {schema}.ack_held(
    p_ids text[], p_leases integer[], p_now double precision, p_channel_salt text
) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    v_statuses text[];
    v_seqs bigint[];              -- the jobs acked, and per ack (in the order given):
    v_ords integer[];             -- its place in the batch,
    v_tenants bigint[];           -- its job's tenant, start and charge
    v_started double precision[];
    v_charged double precision[];
    v_queues text[];              -- (its queue: joined to queues in the tenants' UPDATE, so
    v_done integer;               -- decayed stays inlined there)
    a record;
    t record;
BEGIN
    -- the jobs named, locked in seq order; a token is 'ok' when it holds its running job's
    -- lease before the deadline and no earlier token of the batch acked that job
    WITH locked AS MATERIALIZED (
        SELECT x.seq, x.id, x.state, x.leases, x.deadline, x.tenant_id, x.started_at,
               x.charged, x.queue
        FROM {schema}.jobs x WHERE x.id = ANY(p_ids) ORDER BY x.seq FOR UPDATE
    ), found AS (
        SELECT p.ord, j.seq, j.tenant_id, j.started_at, j.charged, j.queue, CASE
            WHEN j.seq IS NULL OR j.state <> 'running' OR j.leases <> p.lease THEN 'not_found'
            WHEN (p_now < j.deadline) IS NOT TRUE THEN 'expired'
            WHEN row_number() OVER (PARTITION BY j.seq, p.lease ORDER BY p.ord) = 1 THEN 'ok'
            ELSE 'not_found' END AS status
        FROM unnest(p_ids, p_leases) WITH ORDINALITY AS p(id, lease, ord)
        LEFT JOIN locked j ON j.id = p.id
    )
    SELECT array_agg(f.status ORDER BY f.ord),
           array_agg(f.seq ORDER BY f.ord) FILTER (WHERE f.status = 'ok'),
           array_agg(f.ord ORDER BY f.ord) FILTER (WHERE f.status = 'ok'),
           array_agg(f.tenant_id ORDER BY f.ord) FILTER (WHERE f.status = 'ok'),
           array_agg(f.started_at ORDER BY f.ord) FILTER (WHERE f.status = 'ok'),
           array_agg(f.charged ORDER BY f.ord) FILTER (WHERE f.status = 'ok'),
           array_agg(f.queue ORDER BY f.ord) FILTER (WHERE f.status = 'ok')
    INTO v_statuses, v_seqs, v_ords, v_tenants, v_started, v_charged, v_queues
    FROM found f;
    IF v_seqs IS NULL THEN
        RETURN coalesce(v_statuses, ARRAY[]::text[]);
    END IF;
    -- running -> succeeded: every acked job moved to succeeded_jobs in one statement
    WITH moved AS (
        DELETE FROM {schema}.jobs x WHERE x.seq = ANY(v_seqs)
        RETURNING x.id, x.seq, x.tenant_id, x.priority, x.attempts, x.max_attempts,
                  x.enqueued_at, x.run_at, x.started_at, x.name, x.payload, x.last_error
    )
    INSERT INTO {schema}.succeeded_jobs (
        id, seq, tenant_id, priority, attempts, max_attempts, enqueued_at, run_at, started_at,
        finished_at, name, payload, last_error)
    SELECT m.id, m.seq, m.tenant_id, m.priority, m.attempts, m.max_attempts, m.enqueued_at,
           m.run_at, m.started_at, p_now, m.name, m.payload, m.last_error
    FROM moved m;
    -- their tenants, in rounds: round k applies each tenant's k-th lease (in the order given),
    -- every tenant of a round in one UPDATE, so a tenant's leases apply one after another, as
    -- acking them one by one would, and a batch of distinct tenants is one statement. The rows
    -- are locked first, in id order: the UPDATE's own order would depend on its plan.
    -- F = finish_after_ack(…); usage = max(decayed(usage, usage_at, now) + (F_new - F_old), 0);
    -- S = max(F, V) if eligible
    PERFORM 1 FROM {schema}.tenants x WHERE x.id = ANY(v_tenants) ORDER BY x.id
    FOR NO KEY UPDATE;
    FOR a IN
        SELECT r.round, array_agg(r.tenant_id) AS ids, array_agg(r.started_at) AS started,
               array_agg(r.charged) AS charged, array_agg(r.queue) AS queues, count(*) AS n
        FROM (SELECT d.*, row_number() OVER (PARTITION BY d.tenant_id ORDER BY d.ord) AS round
              FROM unnest(v_ords, v_tenants, v_started, v_charged, v_queues)
                  AS d(ord, tenant_id, started_at, charged, queue)) r
        GROUP BY r.round
        ORDER BY r.round
    LOOP
        v_done := 0;
        -- every value is computed from x itself (not from an earlier read of the row), so
        -- when another ack of this tenant commits first, the UPDATE redoes it on the new row
        FOR t IN
            UPDATE {schema}.tenants x
            SET finish_tag = {schema}.finish_after_ack(
                    x.finish_tag, x.weight, d.started_at, d.charged, p_now),
                start_tag = CASE
                    WHEN x.ready > 0 AND (x.max_running IS NULL OR x.running - 1 < x.max_running)
                         AND x.weight > 0 AND x.limited_until IS NULL
                    THEN GREATEST(
                        {schema}.finish_after_ack(
                            x.finish_tag, x.weight, d.started_at, d.charged, p_now),
                        d.vclock) END,
                usage = GREATEST(
                    {schema}.decayed(x.usage, x.usage_at, p_now, d.half_life)
                    + ({schema}.finish_after_ack(
                           x.finish_tag, x.weight, d.started_at, d.charged, p_now)
                       - x.finish_tag),
                    0.0::double precision),
                usage_at = GREATEST(x.usage_at, p_now),
                running = x.running - 1,
                succeeded = x.succeeded + 1,
                kept = x.kept + 1
            FROM (SELECT u.tenant_id, u.started_at, u.charged, q.vclock,
                         coalesce(q.half_life, 60.0::double precision) AS half_life
                  FROM unnest(a.ids, a.started, a.charged, a.queues)
                      AS u(tenant_id, started_at, charged, queue)
                  LEFT JOIN {schema}.queues q ON q.name = u.queue) d
            WHERE x.id = d.tenant_id AND x.running > 0
            RETURNING x.queue, x.ready, x.running, x.max_running, x.weight, x.limited_until
        LOOP
            v_done := v_done + 1;
            -- eligible now (running already lowered) but not before: wake the queue's workers
            IF t.ready > 0 AND t.weight > 0 AND t.limited_until IS NULL
               AND t.max_running IS NOT NULL AND t.running < t.max_running
               AND NOT t.running + 1 < t.max_running THEN
                PERFORM pg_notify('fairq_' || substr(md5(p_channel_salt || t.queue), 1, 24), '');
            END IF;
        END LOOP;
        IF v_done < a.n THEN
            RAISE EXCEPTION 'fairq: a tenant row of % would go below 0 running', a.ids;
        END IF;
    END LOOP;
    RETURN v_statuses;
END
$$;

-- ack_many: the queues' shared locks (by key, as queries.sql), then ack_held.
CREATE OR REPLACE FUNCTION {schema}.ack_many(
    p_ids text[], p_leases integer[], p_now double precision, p_seed bigint,
    p_channel_salt text
) RETURNS text[]
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see 0003_hot_paths.sql
    PERFORM pg_advisory_xact_lock_shared(s.k)
    FROM (SELECT DISTINCT hashtextextended(x.queue, p_seed) AS k
          FROM {schema}.jobs x WHERE x.id = ANY(p_ids)) s
    ORDER BY s.k;
    RETURN {schema}.ack_held(p_ids, p_leases, p_now, p_channel_salt);
END
$$;

ALTER FUNCTION {schema}.dequeue(text[], bigint, text, double precision, integer)
    SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION {schema}.ack(text, integer, double precision, bigint, text)
    SET plan_cache_mode = force_generic_plan;
