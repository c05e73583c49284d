-- fairq PostgreSQL schema, version 3: dequeue and ack in one round trip each.
--
-- The Python code (events.py) is the readable statement of the rules and handles every event;
-- these two functions repeat the two hottest ones server-side, so a worker's dequeue or ack is
-- one statement (in autocommit: one implicit transaction, one round trip). They evaluate the
-- same expressions in the same order as fairq/policy/fairness.py, in double precision, so the
-- tags are bit-identical (the model-vs-store state machine in tests/conformance checks it).
--
-- Durability: a dequeue or ack commits without waiting for its WAL flush
-- (synchronous_commit = off, for that transaction only). The queue lock is held until commit,
-- so waiting for the disk there would make every other worker of the queue wait for it too.
-- Nothing can be lost by it: if the server crashes before the flush, the job simply is ready
-- (or running) again and runs again, which at-least-once delivery allows. Enqueues,
-- migrations and settings always commit durably.
--
-- Queue locks: pg_advisory_xact_lock(hashtextextended(queue, seed)), where the caller passes
-- the schema's seed; queries.sql (lock_queues_*) takes the very same keys.

-- Hands out up to p_limit head jobs, each of the eligible tenant with the smallest
-- (start_tag, head_seq), trying p_queues in order. The caller holds the queues' exclusive
-- locks: no other transaction writes these tenants or their ready jobs meanwhile, so the
-- rows need no row locks (and SKIP LOCKED would skip the order we must keep).
CREATE FUNCTION {schema}.dispatch(
    p_queues text[], p_worker text, p_now double precision, p_limit integer
) RETURNS TABLE (
    l_id text, l_name text, l_queue text, l_tenant text, l_payload text, l_attempts integer,
    l_max_attempts integer, l_started_at double precision, l_deadline double precision,
    l_lease_timeout double precision, l_cost double precision
) LANGUAGE plpgsql AS $$
DECLARE
    t {schema}.tenants%ROWTYPE;
    j {schema}.jobs%ROWTYPE;
    v_finish double precision;
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
        SET state = 'running', attempts = x.attempts + 1, started_at = p_now,
            deadline = p_now + x.lease_timeout, worker_id = p_worker
        WHERE x.seq = t.head_seq
        RETURNING x.* INTO j;

        -- V = S; F = S + estimate / w; then S = F while still eligible (fairness.py)
        v_finish := t.start_tag + j.cost / t.weight;
        v_eligible := t.ready - 1 > 0 AND (t.max_running IS NULL OR t.running + 1 < t.max_running);
        UPDATE {schema}.queues SET vclock = t.start_tag WHERE name = t.queue;
        UPDATE {schema}.tenants x
        SET finish_tag = v_finish,
            start_tag = CASE WHEN v_eligible THEN v_finish END,
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
        l_payload := j.payload; l_attempts := j.attempts; l_max_attempts := j.max_attempts;
        l_started_at := j.started_at; l_deadline := j.deadline;
        l_lease_timeout := j.lease_timeout; l_cost := j.cost;
        RETURN NEXT;
        v_taken := v_taken + 1;
    END LOOP;
END
$$;

-- A whole dequeue when no maintenance is due: lock the queues, check that nothing is due
-- (a due scheduled job, an overdue lease, an inbox row), dispatch. When something is due it
-- returns one row with due = true and changes nothing; the caller then runs maintenance in
-- Python and calls dispatch() in the same transaction.
CREATE FUNCTION {schema}.dequeue(
    p_queues text[], p_seed bigint, p_worker text, p_now double precision, p_limit integer
) RETURNS TABLE (
    due boolean, l_id text, l_name text, l_queue text, l_tenant text, l_payload text,
    l_attempts integer, l_max_attempts integer, l_started_at double precision,
    l_deadline double precision, l_lease_timeout double precision, l_cost double precision
) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see the note at the top
    PERFORM pg_advisory_xact_lock(k)
    FROM (SELECT DISTINCT hashtextextended(n, p_seed) AS k FROM unnest(p_queues) AS n) s
    ORDER BY k;
    IF EXISTS (
        SELECT 1 FROM unnest(p_queues) AS n
        WHERE (SELECT j.run_at FROM {schema}.jobs j
               WHERE j.queue = n AND j.state = 'scheduled'
               ORDER BY j.run_at, j.seq LIMIT 1) <= p_now
           OR (SELECT j.deadline FROM {schema}.jobs j
               WHERE j.queue = n AND j.state = 'running'
               ORDER BY j.deadline, j.seq LIMIT 1) <= p_now
           OR (SELECT i.seq FROM {schema}.inbox i
               WHERE i.queue = n ORDER BY i.seq LIMIT 1) IS NOT NULL
    ) THEN
        due := true;
        RETURN NEXT;
        RETURN;
    END IF;
    RETURN QUERY SELECT false, d.* FROM {schema}.dispatch(p_queues, p_worker, p_now, p_limit) d;
END
$$;

-- Ack of a held lease: 'ok', 'not_found' (unknown, finished, or another attempt) or 'expired'
-- (with the deadline); nothing changes unless 'ok'. Locks: the queue's shared lock, the job,
-- then its tenant (the order of queries.sql). NOTIFYs the queue when the freed slot makes a
-- capped tenant with ready jobs eligible again.
CREATE FUNCTION {schema}.ack(
    p_id text, p_attempt integer, p_now double precision, p_seed bigint, p_channel_salt text
) RETURNS TABLE (status text, lease_deadline double precision)
LANGUAGE plpgsql AS $$
DECLARE
    v_queue text;
    j {schema}.jobs%ROWTYPE;
    t {schema}.tenants%ROWTYPE;
    v_vclock double precision;
    v_finish double precision;
    v_was_eligible boolean;
    v_eligible boolean;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see the note at the top
    SELECT x.queue INTO v_queue FROM {schema}.jobs x WHERE x.id = p_id;
    IF NOT FOUND THEN
        status := 'not_found'; RETURN NEXT; RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(v_queue, p_seed));
    SELECT * INTO j FROM {schema}.jobs x WHERE x.id = p_id FOR UPDATE;
    IF NOT FOUND OR j.state <> 'running' OR j.attempts <> p_attempt THEN
        status := 'not_found'; RETURN NEXT; RETURN;
    END IF;
    IF p_now >= j.deadline THEN
        status := 'expired'; lease_deadline := j.deadline; RETURN NEXT; RETURN;
    END IF;
    SELECT * INTO t FROM {schema}.tenants x WHERE x.id = j.tenant_id FOR UPDATE;
    SELECT q.vclock INTO v_vclock FROM {schema}.queues q WHERE q.name = j.queue;

    -- F = F + (max(ended - started, MIN_CHARGE) - estimate) / w; S = max(F, V) if eligible
    v_finish := t.finish_tag
        + (GREATEST(p_now - j.started_at, 0.001::double precision) - j.cost) / t.weight;
    v_was_eligible := t.ready > 0 AND (t.max_running IS NULL OR t.running < t.max_running);
    v_eligible := t.ready > 0 AND (t.max_running IS NULL OR t.running - 1 < t.max_running);

    UPDATE {schema}.jobs x SET state = 'succeeded', finished_at = p_now, deadline = NULL
    WHERE x.seq = j.seq;
    UPDATE {schema}.tenants x
    SET finish_tag = v_finish,
        start_tag = CASE WHEN v_eligible THEN GREATEST(v_finish, v_vclock) END,
        running = x.running - 1,
        succeeded = x.succeeded + 1
    WHERE x.id = t.id AND x.running > 0;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fairq: tenant row % would go below 0 running', t.id;
    END IF;
    IF v_eligible AND NOT v_was_eligible THEN
        PERFORM pg_notify('fairq_' || substr(md5(p_channel_salt || j.queue), 1, 24), '');
    END IF;
    status := 'ok'; RETURN NEXT;
END
$$;
