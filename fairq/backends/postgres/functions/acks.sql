-- Acks, server-side: one algorithm for ack, ack_many and ack_and_dequeue.
--
-- Locks, in the order of queries/locks.sql: the queues (advisory, shared, or exclusive for the
-- queues an ack_and_dequeue dispatches from), then the jobs by seq, then their tenants by id.
-- Under a queue's exclusive lock nobody else writes its jobs or tenants (every writer takes
-- the queue lock first, at least shared), so their rows need no row lock: ack_held locks only
-- the rows of queues held shared, where a heartbeat or another ack may write them meanwhile.

-- Acks of several leases, exactly as acking each (id, lease) in the order given: one status
-- per token, 'ok', 'not_found' (unknown, not running, another lease, or acked earlier in the
-- batch) or 'expired'; nothing changes for a token that is not 'ok'. The caller holds the
-- queue locks: exclusive for p_exclusive, shared for the other queues of the jobs named.
-- Each acked job moves to succeeded_jobs (move_acked) and its run ends (succeeded_runs, which
-- counts its run time in the figures; its tenant rows written here, a call fewer per ack); a
-- claimed run's charge is a sample of its (queue, name)'s learned cost (costs.sql:
-- learn_costs, after the tenants, so that a dispatch in the same call charges what the acks
-- taught).
CREATE FUNCTION {schema}.ack_held(
    p_ids text[], p_leases integer[], p_now double precision, p_exclusive text[],
    p_channel_salt text, p_defer text[], OUT statuses text[], OUT pending {schema}.tenants[]
)
LANGUAGE plpgsql AS $$
DECLARE
    m record;  -- the jobs moved (move_acked)
    r record;  -- their tenants as the runs left them (succeeded_runs)
BEGIN
    pending := ARRAY[]::{schema}.tenants[];
    IF coalesce(cardinality(p_ids), 0) = 0 THEN
        statuses := ARRAY[]::text[];
        RETURN;
    END IF;
    -- only running jobs: a stale token's job, ready again, may be the head a dispatch is
    -- about to start, and must not be held here while this ack waits for a tenant. Each job
    -- found by id, then locked by its seq, in seq order. The state is tested as "IS TRUE" so
    -- that the planner cannot use jobs_running (whose predicate it is): the generic plans of
    -- this step read all of that index, every running job, on each call (270 buffers for 10
    -- jobs in tests/postgres/test_cached_plans.py)
    PERFORM 1
    FROM (SELECT y.seq FROM unnest(p_ids) AS p(id)
          CROSS JOIN LATERAL (SELECT y.seq FROM {schema}.jobs y WHERE y.id = p.id OFFSET 0) y
          ORDER BY y.seq) o
    CROSS JOIN LATERAL (
        SELECT 1 FROM {schema}.jobs x
        WHERE x.seq = o.seq AND (x.state = 'running') IS TRUE AND x.queue <> ALL(p_exclusive)
        FOR UPDATE) l;
    p_now := {schema}.event_time(p_now);  -- the locks are held: the event's time (clock.sql)
    m := {schema}.move_acked(p_ids, p_leases, p_now);
    statuses := m.statuses;
    IF m.tenants IS NOT NULL THEN  -- the rows written here: a call fewer per ack
        r := {schema}.succeeded_runs(m.tenants, m.started, m.charged, p_now, p_exclusive);
        IF r.flush IS NOT NULL THEN
            PERFORM {schema}.fig_flush(r.flush);
        END IF;
        UPDATE {schema}.tenants x  -- as write_tenants
        SET finish_tag = d.finish_tag, start_tag = d.start_tag, usage = d.usage,
            usage_at = d.usage_at, running = d.running, succeeded = d.succeeded, kept = d.kept,
            fig_slot = d.fig_slot, fig_keys = d.fig_keys, fig_counts = d.fig_counts
        FROM unnest(r.held) AS d WHERE x.id = d.id AND d.queue <> ALL(p_defer);
        IF r.capped THEN
            PERFORM {schema}.runs_freed(r.held, m.tenants, p_channel_salt);
        END IF;
        pending := ARRAY(SELECT d FROM unnest(r.held) AS d WHERE d.queue = ANY(p_defer)
                         ORDER BY d.id);
    END IF;
    IF m.samples IS NOT NULL THEN
        PERFORM {schema}.learn_costs(m.queues, m.names, m.samples);
    END IF;
END
$$;

-- The acks' jobs moved to succeeded_jobs, the jobs locked (ack_held). Each token's job found
-- by id alone (a cached plan that joined the tokens to jobs on state and deadline read
-- jobs_running for the whole queue, every running job on every call: 318 buffers with 5,000
-- leases held, tests/postgres/test_cached_plans.py); a token is 'ok' when it holds its running
-- job's lease before the deadline and no earlier token of the batch acked that job. The 'ok'
-- jobs move in one statement. Returns each token's status, and per 'ok' token, in token
-- order, its job's tenant, start and charge; per claimed run, its queue, name and sample.
CREATE FUNCTION {schema}.move_acked(
    p_ids text[], p_leases integer[], p_now double precision, OUT statuses text[],
    OUT tenants bigint[], OUT started double precision[], OUT charged double precision[],
    OUT queues text[], OUT names text[], OUT samples double precision[]
) LANGUAGE plpgsql AS $$
BEGIN
    WITH found AS MATERIALIZED (
        SELECT p.ord, j.seq, j.tenant_id, j.started_at, j.charged, j.queue, j.name,
               j.claimed, CASE
            WHEN j.seq IS NULL OR j.state <> 'running' OR j.leases <> p.lease THEN 'not_found'
            WHEN (p_now < j.deadline) IS NOT TRUE THEN 'expired'
            WHEN row_number() OVER (PARTITION BY j.seq, p.lease ORDER BY p.ord) = 1 THEN 'ok'
            ELSE 'not_found' END AS status
        FROM unnest(p_ids, p_leases) WITH ORDINALITY AS p(id, lease, ord)
        LEFT JOIN LATERAL (
            SELECT x.seq, x.state, x.leases, x.deadline, x.tenant_id, x.started_at, x.charged,
                   x.queue, x.name, x.claimed
            FROM {schema}.jobs x WHERE x.id = p.id) j ON true
    ), moved AS (
        DELETE FROM {schema}.jobs x
        WHERE x.seq = ANY(ARRAY(SELECT f.seq FROM found f WHERE f.status = 'ok'))
        RETURNING x.id, x.seq, x.tenant_id, x.priority, x.attempts, x.max_attempts,
                  x.enqueued_at, x.run_at, x.started_at, x.name, x.payload, x.last_error,
                  x.ready_at, x.headers
    ), stored AS (
        INSERT INTO {schema}.succeeded_jobs (
            id, seq, tenant_id, priority, attempts, max_attempts, enqueued_at, run_at,
            started_at, finished_at, name, payload, last_error, ready_at, headers)
        SELECT m.id, m.seq, m.tenant_id, m.priority, m.attempts, m.max_attempts,
               m.enqueued_at, m.run_at, m.started_at, p_now, m.name, m.payload, m.last_error,
               m.ready_at, m.headers
        FROM moved m
    )
    SELECT array_agg(f.status ORDER BY f.ord),
           array_agg(f.tenant_id ORDER BY f.ord) FILTER (WHERE f.status = 'ok'),
           array_agg(f.started_at ORDER BY f.ord) FILTER (WHERE f.status = 'ok'),
           array_agg(f.charged ORDER BY f.ord) FILTER (WHERE f.status = 'ok'),
           array_agg(f.queue ORDER BY f.ord) FILTER (WHERE f.status = 'ok' AND f.claimed),
           array_agg(f.name ORDER BY f.ord) FILTER (WHERE f.status = 'ok' AND f.claimed),
           array_agg(GREATEST(p_now - f.started_at, 0.001::double precision) ORDER BY f.ord)
               FILTER (WHERE f.status = 'ok' AND f.claimed)
    INTO statuses, tenants, started, charged, queues, names, samples
    FROM found f;
END
$$;

-- The end of succeeded runs for their tenants (p_tenants[k] ran from p_started[k], charged
-- p_charged[k], and ended at p_now), applied one after another in the order given: each
-- tenant row is read once (locked first, in id order, unless its queue is in p_exclusive) and
-- changed in memory. The arithmetic is fairq.policy.tenant.end_run then
-- retag (fairness.sql): F = finish_after_run(…); usage = max(decayed(usage, usage_at, now) +
-- (F_new - F_old), 0); running - 1; S = max(F, V) if eligible (set after each run: the last
-- one stands). Each run's time is counted in its tenant's row (succeeded: no outcome row,
-- fairq/figures.py; fig_keys, fig_counts as dispatch.sql's take_picks counts waits). Returns
-- the rows as the runs left them (held, in id order), the rows as read whose counts are of an
-- earlier slot (flush: for fig_flush), and whether a tenant or queue among them has a cap
-- (capped: runs_freed). ack_held writes them once, except the rows of the queues in p_defer,
-- returned locked as the runs left them: ack_dequeue's dispatch writes those (dispatch.sql),
-- once for the ack and its own picks together; a tenant row written twice in one call cost a
-- second new row version and its index entries (start_tag is indexed, so neither update is
-- HOT).
CREATE FUNCTION {schema}.succeeded_runs(
    p_tenants bigint[], p_started double precision[], p_charged double precision[],
    p_now double precision, p_exclusive text[], OUT held {schema}.tenants[],
    OUT flush {schema}.tenants[], OUT capped boolean
) LANGUAGE plpgsql AS $$
DECLARE
    v_ids bigint[];  -- held (position i: the i-th in id order) as the runs leave them
    v_half_life double precision[];
    v_vclock double precision[];
    t {schema}.tenants%ROWTYPE;
    v_new double precision;
    i integer;
    v_slot bigint := {schema}.fig_slot(p_now);
    v_key integer;
BEGIN
    PERFORM 1 FROM {schema}.tenants x
    WHERE x.id = ANY(p_tenants) AND x.queue <> ALL(p_exclusive)
    ORDER BY x.id FOR NO KEY UPDATE;
    SELECT array_agg(x ORDER BY x.id), array_agg(x.id ORDER BY x.id),
           array_agg(coalesce(q.half_life, 60.0::double precision) ORDER BY x.id),
           array_agg(q.vclock ORDER BY x.id),
           bool_or(x.max_running IS NOT NULL OR q.max_in_flight IS NOT NULL),
           array_agg(x) FILTER (WHERE x.fig_slot <> v_slot AND cardinality(x.fig_keys) > 0)
    INTO held, v_ids, v_half_life, v_vclock, capped, flush
    FROM {schema}.tenants x LEFT JOIN {schema}.queues q ON q.name = x.queue
    WHERE x.id = ANY(p_tenants);
    FOR k IN 1..cardinality(p_tenants) LOOP
        i := array_position(v_ids, p_tenants[k]);
        t := held[i];
        IF t.running <= 0 THEN
            RAISE EXCEPTION 'fairq: tenant row % would go below 0 running', t.id;
        END IF;
        v_new := {schema}.finish_after_run(
            t.finish_tag, t.weight, p_started[k], p_charged[k], p_now);
        t.usage := {schema}.usage_after(
            t.usage, t.usage_at, p_now, v_half_life[i], v_new - t.finish_tag);
        t.usage_at := GREATEST(t.usage_at, p_now);
        t.finish_tag := v_new;
        t.running := t.running - 1;
        t.succeeded := t.succeeded + 1;
        t.kept := t.kept + 1;
        t.start_tag := CASE WHEN {schema}.eligible(
            t.ready, t.running, t.max_running, t.weight, t.limited_until)
            THEN GREATEST(t.finish_tag, v_vclock[i]) END;
        v_key := 32 + {schema}.fig_bucket(p_now - p_started[k]);
        t.fig_counts := {schema}.fig_counts_after(
            t.fig_keys, t.fig_counts, t.fig_slot = v_slot, v_key);
        t.fig_keys := {schema}.fig_keys_after(t.fig_keys, t.fig_slot = v_slot, v_key);
        t.fig_slot := v_slot;
        held[i] := t;
    END LOOP;
END
$$;

-- After runs ended (ack_held: p_rows as they left them, held; the runs of p_tenants, a
-- tenant's id once per run): a freed slot that makes a capped tenant with ready
-- jobs eligible again wakes its queue's workers. A queue with a cap on its leased jobs
-- (max_in_flight) counts the runs ended off its in_flight, its row locked in name order after
-- the tenants; one that goes from full to not full wakes its workers. An uncapped queue's row
-- is not written: acks of one queue under its shared lock must not queue up on that row.
CREATE FUNCTION {schema}.runs_freed(
    p_rows {schema}.tenants[], p_tenants bigint[], p_channel_salt text
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t {schema}.tenants%ROWTYPE;
    r record;
    v_left bigint;
    v_cap integer;
BEGIN
    FOR i IN 1..cardinality(p_rows) LOOP
        t := p_rows[i];
        IF {schema}.eligible(t.ready, t.running, t.max_running, t.weight, t.limited_until)
           AND t.max_running IS NOT NULL AND NOT t.running
               + cardinality(array_positions(p_tenants, t.id)) < t.max_running THEN
            PERFORM pg_notify('fairq_' || substr(md5(p_channel_salt || t.queue), 1, 24), '');
        END IF;
    END LOOP;
    FOR r IN
        SELECT d.queue, count(*) AS ended
        FROM unnest(p_tenants) AS e(id) JOIN unnest(p_rows) AS d ON d.id = e.id
        JOIN {schema}.queues q ON q.name = d.queue
        WHERE q.max_in_flight IS NOT NULL
        GROUP BY d.queue ORDER BY d.queue
    LOOP
        UPDATE {schema}.queues SET in_flight = in_flight - r.ended
        WHERE name = r.queue AND max_in_flight IS NOT NULL
        RETURNING in_flight, max_in_flight INTO v_left, v_cap;
        IF v_left < v_cap AND v_left + r.ended >= v_cap THEN
            PERFORM pg_notify('fairq_' || substr(md5(p_channel_salt || r.queue), 1, 24), '');
        END IF;
    END LOOP;
END
$$;

-- Tenant rows as a step left them in memory (held by this transaction), written back: the
-- columns the acks' run ends change; the rows of the queues in p_except are left out (the
-- caller writes them later, with its own changes). dispatch's (p_pending); ack_held writes
-- its rows with the same statement inline.
CREATE FUNCTION {schema}.write_tenants(p_rows {schema}.tenants[], p_except text[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {schema}.tenants x
    SET finish_tag = d.finish_tag, start_tag = d.start_tag, usage = d.usage,
        usage_at = d.usage_at, running = d.running, succeeded = d.succeeded, kept = d.kept,
        fig_slot = d.fig_slot, fig_keys = d.fig_keys, fig_counts = d.fig_counts
    FROM unnest(p_rows) AS d
    WHERE x.id = d.id AND d.queue <> ALL(p_except);
END
$$;

-- ack_many: the queues' shared locks (by key, as queries/locks.sql), then ack_held.
CREATE FUNCTION {schema}.ack_many(
    p_ids text[], p_leases integer[], p_now double precision, p_seed bigint,
    p_channel_salt text
) RETURNS text[]
LANGUAGE plpgsql  -- see dequeue.sql
SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see dequeue.sql
    PERFORM pg_advisory_xact_lock_shared(s.k)
    FROM (SELECT DISTINCT hashtextextended(x.queue, p_seed) AS k
          FROM {schema}.jobs x WHERE x.id = ANY(p_ids)) s
    ORDER BY s.k;
    RETURN ({schema}.ack_held(
        p_ids, p_leases, p_now, ARRAY[]::text[], p_channel_salt, ARRAY[]::text[])).statuses;
END
$$;
