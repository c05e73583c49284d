-- fairq PostgreSQL schema, version 10: ack_dequeue acks the jobs of the queues it holds
-- exclusive without row locks, and writes each of their tenants once.
--
-- ack_dequeue runs under the exclusive lock of every queue it dequeues from, and a worker
-- acks jobs of the queues it serves. Every writer of a queue's jobs and tenants takes that
-- queue's lock first, at least shared (queries.sql), so while it is held exclusive nobody
-- else writes them. So ack_exclusive:
-- * deletes the acked jobs with no row lock first (a lock wrote each row once more, and a WAL
--   record, before its delete);
-- * applies a tenant's acks in memory, one after another exactly as ack_held's rounds do, and
--   writes the tenant once (ack_held wrote a row version per round, and locked the rows first).
-- Tokens it does not ack (another lease, expired, unknown, or a job of a queue held only
-- shared) go to ack_held, which finds their status, or acks them under their shared locks, as
-- before; tokens of different queues never touch the same rows, so the order between the two
-- parts changes no outcome.

-- Acks, as ack_held, of the tokens whose job is running in one of p_queues under that lease;
-- the caller holds those queues' exclusive locks (and the shared locks of the other tokens'
-- queues, for ack_held).
CREATE FUNCTION {schema}.ack_exclusive(
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
    v_wake text[] := ARRAY[]::text[];  -- queues whose workers a freed capped slot wakes
    v_new double precision;
    r record;
    i integer;
BEGIN
    -- running -> succeeded: the jobs whose first token holds the lease, moved in one statement
    WITH tokens AS (
        SELECT p.id, p.lease, min(p.ord) AS ord
        FROM unnest(p_ids, p_leases) WITH ORDINALITY AS p(id, lease, ord)
        GROUP BY p.id, p.lease
    ), moved AS (
        DELETE FROM {schema}.jobs x USING tokens p
        WHERE x.id = p.id AND x.leases = p.lease AND x.state = 'running'
          AND p_now < x.deadline AND x.queue = ANY(p_queues)
        RETURNING p.ord, x.id, x.seq, x.tenant_id, x.priority, x.attempts, x.max_attempts,
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
    SELECT array_agg(m.ord ORDER BY m.ord), array_agg(m.tenant_id ORDER BY m.ord),
           array_agg(m.started_at ORDER BY m.ord), array_agg(m.charged ORDER BY m.ord)
    INTO v_ords, v_tenants, v_started, v_charged
    FROM moved m;

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

-- ack_dequeue as in 0009_ack_dequeue.sql, its acks through ack_exclusive.
CREATE OR REPLACE FUNCTION {schema}.ack_dequeue(
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
        statuses := {schema}.ack_exclusive(
            p_ids, p_leases, p_ack_now, p_queues, p_channel_salt);
    END IF;
    RETURN NEXT;
    IF NOT due THEN
        RETURN QUERY SELECT NULL::text[], false, d.*
        FROM {schema}.dispatch(p_queues, p_worker, p_now, p_limit) d;
    END IF;
END
$$;
