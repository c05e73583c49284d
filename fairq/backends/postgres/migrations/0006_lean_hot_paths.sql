-- fairq PostgreSQL schema, version 6: fewer statements, row locks and WAL per job.
--
-- The rules are unchanged (same expressions, same order, so the same doubles); what changes is
-- how much work the server does for them (benchmarks/postgres_job_cost.py measures it):
-- * dispatch moves the queue's V once per queue per call (to the start tag of the last job it
--   handed out there) instead of once per job: nothing in between reads V, since the caller
--   holds the queue's exclusive lock, so the row ends the same with one update, not up to
--   limit of them.
-- * ack_many no longer locks every job and tenant first and then calls ack() per lease (about
--   ten statements a job). It updates each job straight from running to succeeded in seq
--   order (the UPDATE's own row lock, so no separate lock record in the WAL), then each tenant
--   in id order with the arithmetic inside the UPDATE: two statements a job, locks still in
--   the order of queries.sql. A tenant's leases keep their order in the batch, and different
--   tenants do not depend on each other (V does not move under the shared queue lock), so the
--   result is ack() on each lease in the order given.
-- * ack() is ack_many of one lease, so the ack rules live in one function.

-- Hands out up to p_limit head jobs, each of the eligible tenant with the smallest
-- (start_tag, head_seq), trying p_queues in order. The caller holds the queues' exclusive
-- locks: no other transaction writes these tenants or their ready jobs meanwhile, so the
-- rows need no row locks (and SKIP LOCKED would skip the order we must keep). The arithmetic
-- is fairness.finish_after_dispatch, history.add_usage and rate.after_start / limited_until,
-- in their order; V = S is stored when the call moves on to another queue or ends.
CREATE OR REPLACE FUNCTION {schema}.dispatch(
    p_queues text[], p_worker text, p_now double precision, p_limit integer
) RETURNS TABLE (
    l_id text, l_name text, l_queue text, l_tenant text, l_payload text, l_attempts integer,
    l_leases integer, l_max_attempts integer, l_started_at double precision,
    l_deadline double precision, l_lease_timeout double precision, l_cost double precision
) LANGUAGE plpgsql AS $$
DECLARE
    t {schema}.tenants%ROWTYPE;
    j {schema}.jobs%ROWTYPE;
    v_queue text;
    v_vclock double precision;
    v_half_life double precision;
    v_finish double precision;
    v_usage double precision;
    v_interval double precision;
    v_tat double precision;
    v_until double precision;
    v_eligible boolean;
    v_taken integer := 0;
BEGIN
    WHILE v_taken < p_limit LOOP
        SELECT e.* INTO t
        FROM unnest(p_queues) WITH ORDINALITY AS q(name, ord)
        CROSS JOIN LATERAL (
            SELECT * FROM {schema}.tenants x
            WHERE x.queue = q.name AND x.start_tag IS NOT NULL
            ORDER BY x.start_tag, x.head_seq
            LIMIT 1
        ) e
        ORDER BY q.ord
        LIMIT 1;
        EXIT WHEN NOT FOUND;

        UPDATE {schema}.jobs x
        SET state = 'running', attempts = x.attempts + 1, leases = x.leases + 1,
            started_at = p_now, deadline = p_now + x.lease_timeout, worker_id = p_worker,
            charged = x.cost
        WHERE x.seq = t.head_seq
        RETURNING x.* INTO j;

        -- V = S (stored below, once per queue); F = S + estimate / w
        IF v_queue IS DISTINCT FROM t.queue THEN
            IF v_queue IS NOT NULL THEN
                UPDATE {schema}.queues SET vclock = v_vclock WHERE name = v_queue;
            END IF;
            v_queue := t.queue;
            SELECT coalesce(q.half_life, 60.0::double precision) INTO v_half_life
            FROM {schema}.queues q WHERE q.name = t.queue;
        END IF;
        v_vclock := t.start_tag;
        v_finish := t.start_tag + j.cost / t.weight;
        -- usage = max(decayed(usage, usage_at, now) + (F_new - F_old), 0)
        v_usage := GREATEST(
            {schema}.decayed(t.usage, t.usage_at, p_now, v_half_life) + (v_finish - t.finish_tag),
            0.0::double precision);
        -- GCRA: tat = max(tat, now) + interval; limited until tat - tolerance if after now
        v_tat := t.tat;
        v_until := NULL;
        IF t.rate_count IS NOT NULL THEN
            v_interval := t.rate_period / t.rate_count;
            IF t.tat IS NULL THEN
                v_tat := p_now + v_interval;
            ELSE
                v_tat := GREATEST(t.tat, p_now) + v_interval;
            END IF;
            IF v_tat - v_interval * (t.rate_burst - 1) > p_now THEN
                v_until := v_tat - v_interval * (t.rate_burst - 1);
            END IF;
        END IF;
        -- then S = F while still eligible
        v_eligible := t.ready - 1 > 0
            AND (t.max_running IS NULL OR t.running + 1 < t.max_running)
            AND t.weight > 0 AND v_until IS NULL;
        UPDATE {schema}.tenants x
        SET finish_tag = v_finish,
            start_tag = CASE WHEN v_eligible THEN v_finish END,
            usage = v_usage,
            usage_at = GREATEST(t.usage_at, p_now),
            tat = v_tat,
            limited_until = v_until,
            ready = x.ready - 1,
            running = x.running + 1,
            head_seq = (SELECT r.seq FROM {schema}.jobs r
                        WHERE r.tenant_id = t.id AND r.state = 'ready'
                        ORDER BY r.priority DESC, r.seq
                        LIMIT 1)
        WHERE x.id = t.id AND (x.max_running IS NULL OR x.running < x.max_running);
        IF NOT FOUND THEN
            RAISE EXCEPTION 'fairq: tenant row % refused a slot over its cap', t.id;
        END IF;

        l_id := j.id; l_name := j.name; l_queue := j.queue; l_tenant := t.tenant;
        l_payload := j.payload; l_attempts := j.attempts; l_leases := j.leases;
        l_max_attempts := j.max_attempts; l_started_at := j.started_at;
        l_deadline := j.deadline; l_lease_timeout := j.lease_timeout; l_cost := j.cost;
        RETURN NEXT;
        v_taken := v_taken + 1;
    END LOOP;
    IF v_queue IS NOT NULL THEN
        UPDATE {schema}.queues SET vclock = v_vclock WHERE name = v_queue;
    END IF;
END
$$;

-- F after a run: F + (max(ended - started, MIN_CHARGE) - charged) / w, unchanged while w = 0
-- (fairness.py). An SQL function, so the planner inlines it into the UPDATE that uses it.
CREATE FUNCTION {schema}.finish_after_ack(
    p_finish double precision, p_weight double precision, p_started double precision,
    p_charged double precision, p_now double precision
) RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_weight > 0
        THEN p_finish + (GREATEST(p_now - p_started, 0.001::double precision) - p_charged)
             / p_weight
        ELSE p_finish END
$$;

-- Acks of several leases in one statement, exactly as acking each (id, lease) in the order
-- given, in one transaction: one status per pair, 'ok', 'not_found' (unknown, finished, or
-- another lease) or 'expired'; nothing changes for a lease that is not 'ok'. Locks in the
-- order of queries.sql: the queues' shared locks by key, the jobs by seq, their tenants by id.
-- NOTIFYs a queue when a freed slot makes a capped tenant with ready jobs eligible again.
CREATE OR REPLACE FUNCTION {schema}.ack_many(
    p_ids text[], p_leases integer[], p_now double precision, p_seed bigint,
    p_channel_salt text
) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    v_statuses text[] := array_fill('not_found'::text, ARRAY[coalesce(cardinality(p_ids), 0)]);
    v_ords integer[] := ARRAY[]::integer[];
    v_tenants bigint[] := ARRAY[]::bigint[];
    v_started double precision[] := ARRAY[]::double precision[];
    v_charged double precision[] := ARRAY[]::double precision[];
    a record;
    j record;
    t record;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see 0003_hot_paths.sql
    PERFORM pg_advisory_xact_lock_shared(s.k)
    FROM (SELECT DISTINCT hashtextextended(x.queue, p_seed) AS k
          FROM {schema}.jobs x WHERE x.id = ANY(p_ids)) s
    ORDER BY s.k;
    -- the jobs, in seq order: running -> succeeded if the lease is held and not over
    FOR a IN
        SELECT x.seq, p.lease, p.ord
        FROM unnest(p_ids, p_leases) WITH ORDINALITY AS p(id, lease, ord)
        CROSS JOIN LATERAL (  -- one probe of the id index each, whatever the table's size
            SELECT y.seq FROM {schema}.jobs y WHERE y.id = p.id LIMIT 1) x
        ORDER BY x.seq, p.ord
    LOOP
        UPDATE {schema}.jobs x SET state = 'succeeded', finished_at = p_now, deadline = NULL
        WHERE x.seq = a.seq AND x.state = 'running' AND x.leases = a.lease
          AND p_now < x.deadline
        RETURNING x.tenant_id, x.started_at, x.charged INTO j;
        IF FOUND THEN
            v_statuses[a.ord::integer] := 'ok';
            v_ords := v_ords || a.ord::integer;
            v_tenants := v_tenants || j.tenant_id;
            v_started := v_started || j.started_at;
            v_charged := v_charged || j.charged;
        ELSIF EXISTS (SELECT 1 FROM {schema}.jobs x WHERE x.seq = a.seq
                      AND x.state = 'running' AND x.leases = a.lease) THEN
            v_statuses[a.ord::integer] := 'expired';
        END IF;
    END LOOP;
    -- their tenants, in id order, each tenant's leases in the order given:
    -- F = finish_after_ack(…); usage = max(decayed(usage, usage_at, now) + (F_new - F_old), 0);
    -- S = max(F, V) if eligible
    FOR a IN
        SELECT * FROM unnest(v_ords, v_tenants, v_started, v_charged)
            AS d(ord, tenant_id, started_at, charged)
        ORDER BY d.tenant_id, d.ord
    LOOP
        -- every value is computed from x itself (not from an earlier read of the row), so
        -- when another ack of this tenant commits first, the UPDATE redoes it on the new row
        UPDATE {schema}.tenants x
        SET finish_tag = {schema}.finish_after_ack(
                x.finish_tag, x.weight, a.started_at, a.charged, p_now),
            start_tag = CASE
                WHEN x.ready > 0 AND (x.max_running IS NULL OR x.running - 1 < x.max_running)
                     AND x.weight > 0 AND x.limited_until IS NULL
                THEN GREATEST(
                    {schema}.finish_after_ack(
                        x.finish_tag, x.weight, a.started_at, a.charged, p_now),
                    (SELECT q.vclock FROM {schema}.queues q WHERE q.name = x.queue)) END,
            usage = GREATEST(
                {schema}.decayed(x.usage, x.usage_at, p_now,
                    (SELECT coalesce(q.half_life, 60.0::double precision)
                     FROM {schema}.queues q WHERE q.name = x.queue))
                + ({schema}.finish_after_ack(
                       x.finish_tag, x.weight, a.started_at, a.charged, p_now)
                   - x.finish_tag),
                0.0::double precision),
            usage_at = GREATEST(x.usage_at, p_now),
            running = x.running - 1,
            succeeded = x.succeeded + 1
        WHERE x.id = a.tenant_id AND x.running > 0
        RETURNING x.queue, x.ready, x.running, x.max_running, x.weight, x.limited_until INTO t;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'fairq: tenant row % would go below 0 running', a.tenant_id;
        END IF;
        -- eligible now (running already lowered) but not before: wake the queue's workers
        IF t.ready > 0 AND t.weight > 0 AND t.limited_until IS NULL
           AND t.max_running IS NOT NULL AND t.running < t.max_running
           AND NOT t.running + 1 < t.max_running THEN
            PERFORM pg_notify('fairq_' || substr(md5(p_channel_salt || t.queue), 1, 24), '');
        END IF;
    END LOOP;
    RETURN v_statuses;
END
$$;

-- Ack of one held lease: ack_many of it, with the deadline when it is 'expired'.
CREATE OR REPLACE FUNCTION {schema}.ack(
    p_id text, p_lease integer, p_now double precision, p_seed bigint, p_channel_salt text
) RETURNS TABLE (status text, lease_deadline double precision)
LANGUAGE plpgsql AS $$
BEGIN
    status := ({schema}.ack_many(ARRAY[p_id], ARRAY[p_lease], p_now, p_seed, p_channel_salt))[1];
    IF status = 'expired' THEN
        SELECT x.deadline INTO lease_deadline FROM {schema}.jobs x WHERE x.id = p_id;
    END IF;
    RETURN NEXT;
END
$$;
