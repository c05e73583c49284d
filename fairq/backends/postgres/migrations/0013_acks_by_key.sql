-- fairq PostgreSQL schema, version 13: an ack finds its jobs by id, however many run.
--
-- ack_exclusive (0010_exclusive_acks.sql) deleted the acked jobs with one DELETE joining the
-- tokens to jobs on id, lease, state, deadline and queue. Its generic plan, made once per
-- connection while the tables were small, read jobs_running for the whole queue (queue and
-- deadline are that index's columns) and matched each running job against the tokens: every
-- ack_and_dequeue read every running job of its queue, 318 buffers with 5,000 leases held by
-- other workers (tests/postgres/test_cached_plans.py), even with no token to ack. Now each
-- token's job is looked up by id alone (a LATERAL subquery the planner cannot merge, so the
-- conditions on state, deadline and queue cannot steer it to jobs_running), the DELETE names the jobs by seq, and a call
-- with no token returns at once.

-- Acks, as ack_held, of the tokens whose job is running in one of p_queues under that lease;
-- the caller holds those queues' exclusive locks (and the shared locks of the other tokens'
-- queues, for ack_held).
CREATE OR REPLACE FUNCTION {schema}.ack_exclusive(
    p_ids text[], p_leases integer[], p_now double precision, p_queues text[],
    p_channel_salt text
) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    v_statuses text[] := array_fill('ok'::text, ARRAY[coalesce(cardinality(p_ids), 0)]);
    v_ords bigint[];              -- per job acked here, in token order: its token's place,
    v_tenants bigint[];           -- its tenant, start and charge
    v_started double precision[];
    v_charged double precision[];
    v_rest integer[];             -- the places of the tokens left to ack_held
    v_rest_statuses text[];
    -- the acked jobs' tenants (position i: the i-th distinct one) as the acks leave them
    v_ids bigint[];
    v_finish double precision[];
    v_usage double precision[];
    v_usage_at double precision[];
    v_running bigint[];
    v_acked bigint[];
    v_weight double precision[];
    v_half_life double precision[];
    v_vclock double precision[];
    v_new double precision;
    r record;
    i integer;
BEGIN
    IF coalesce(cardinality(p_ids), 0) = 0 THEN
        RETURN v_statuses;
    END IF;
    -- running -> succeeded: the jobs whose first token holds the lease, found by id alone
    -- (schema 13: a cached plan that joined the tokens to jobs_running read every running job
    -- of the queue, on every call), then moved in one statement
    WITH tokens AS (
        SELECT p.id, p.lease, min(p.ord) AS ord
        FROM unnest(p_ids, p_leases) WITH ORDINALITY AS p(id, lease, ord)
        GROUP BY p.id, p.lease
    ), held AS MATERIALIZED (
        SELECT p.ord, j.seq
        FROM tokens p
        CROSS JOIN LATERAL (
            SELECT x.seq, x.leases, x.state, x.deadline, x.queue FROM {schema}.jobs x
            WHERE x.id = p.id OFFSET 0) j
        WHERE j.leases = p.lease AND j.state = 'running' AND p_now < j.deadline
          AND j.queue = ANY(p_queues)
    ), moved AS (
        DELETE FROM {schema}.jobs x WHERE x.seq = ANY(ARRAY(SELECT h.seq FROM held h))
        RETURNING x.id, x.seq, x.tenant_id, x.priority, x.attempts, x.max_attempts,
                  x.enqueued_at, x.run_at, x.started_at, x.name, x.payload, x.last_error,
                  x.charged
    ), stored AS (
        INSERT INTO {schema}.succeeded_jobs (
            id, seq, tenant_id, priority, attempts, max_attempts, enqueued_at, run_at,
            started_at, finished_at, name, payload, last_error)
        SELECT m.id, m.seq, m.tenant_id, m.priority, m.attempts, m.max_attempts,
               m.enqueued_at, m.run_at, m.started_at, p_now, m.name, m.payload, m.last_error
        FROM moved m
    )
    SELECT array_agg(h.ord ORDER BY h.ord), array_agg(m.tenant_id ORDER BY h.ord),
           array_agg(m.started_at ORDER BY h.ord), array_agg(m.charged ORDER BY h.ord)
    INTO v_ords, v_tenants, v_started, v_charged
    FROM moved m JOIN held h ON h.seq = m.seq;

    -- the rest, in order, to ack_held
    SELECT array_agg(p.ord ORDER BY p.ord) INTO v_rest
    FROM generate_subscripts(p_ids, 1) AS p(ord)
    WHERE v_ords IS NULL OR p.ord <> ALL(v_ords);
    IF v_rest IS NOT NULL THEN
        v_rest_statuses := {schema}.ack_held(
            ARRAY(SELECT p_ids[o] FROM unnest(v_rest) WITH ORDINALITY AS u(o, n) ORDER BY n),
            ARRAY(SELECT p_leases[o] FROM unnest(v_rest) WITH ORDINALITY AS u(o, n) ORDER BY n),
            p_now, p_channel_salt);
        FOR i IN 1..cardinality(v_rest) LOOP
            v_statuses[v_rest[i]] := v_rest_statuses[i];
        END LOOP;
    END IF;
    IF v_ords IS NULL THEN
        RETURN v_statuses;
    END IF;

    -- their tenants, read once, with their queue's V and half-life
    SELECT array_agg(x.id), array_agg(x.finish_tag), array_agg(x.usage),
           array_agg(x.usage_at), array_agg(x.running), array_agg(x.weight),
           array_agg(coalesce(q.half_life, 60.0::double precision)), array_agg(q.vclock),
           array_fill(0::bigint, ARRAY[count(*)::integer])
    INTO v_ids, v_finish, v_usage, v_usage_at, v_running, v_weight, v_half_life, v_vclock,
         v_acked
    FROM {schema}.tenants x LEFT JOIN {schema}.queues q ON q.name = x.queue
    WHERE x.id = ANY(v_tenants);
    -- each ack in turn: F = finish_after_ack(…);
    -- usage = max(decayed(usage, usage_at, now) + (F_new - F_old), 0)
    FOR k IN 1..cardinality(v_ords) LOOP
        i := array_position(v_ids, v_tenants[k]);
        IF v_running[i] <= 0 THEN
            RAISE EXCEPTION 'fairq: tenant row % would go below 0 running', v_ids[i];
        END IF;
        v_new := {schema}.finish_after_ack(
            v_finish[i], v_weight[i], v_started[k], v_charged[k], p_now);
        v_usage[i] := GREATEST(
            {schema}.decayed(v_usage[i], v_usage_at[i], p_now, v_half_life[i])
            + (v_new - v_finish[i]),
            0.0::double precision);
        v_usage_at[i] := GREATEST(v_usage_at[i], p_now);
        v_finish[i] := v_new;
        v_running[i] := v_running[i] - 1;
        v_acked[i] := v_acked[i] + 1;
    END LOOP;
    -- every tenant once; S = max(F, V) if eligible. A freed slot that makes a capped tenant
    -- with ready jobs eligible again wakes its queue's workers (the first ack under the cap).
    FOR r IN
        UPDATE {schema}.tenants x
        SET finish_tag = d.finish,
            start_tag = CASE
                WHEN x.ready > 0 AND (x.max_running IS NULL OR d.running < x.max_running)
                     AND x.weight > 0 AND x.limited_until IS NULL
                THEN GREATEST(d.finish, d.vclock) END,
            usage = d.usage, usage_at = d.usage_at, running = d.running,
            succeeded = x.succeeded + d.acked, kept = x.kept + d.acked
        FROM unnest(v_ids, v_finish, v_usage, v_usage_at, v_running, v_acked, v_vclock)
            AS d(id, finish, usage, usage_at, running, acked, vclock)
        WHERE x.id = d.id
        RETURNING x.queue, x.ready, x.running, x.max_running, x.weight, x.limited_until,
                  d.acked
    LOOP
        IF r.ready > 0 AND r.weight > 0 AND r.limited_until IS NULL
           AND r.max_running IS NOT NULL AND r.running < r.max_running
           AND NOT r.running + r.acked < r.max_running THEN
            PERFORM pg_notify('fairq_' || substr(md5(p_channel_salt || r.queue), 1, 24), '');
        END IF;
    END LOOP;
    RETURN v_statuses;
END
$$;
