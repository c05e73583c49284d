-- fairq PostgreSQL schema, version 8: succeeded jobs move out of jobs (issue 4).
--
-- An ack used to update the job row to 'succeeded' in place: a new row version in jobs (not
-- HOT: state is in the partial indexes' predicates) with an entry in the primary key, the id
-- index and jobs_succeeded, kept for the retention, and every later dispatch and ack walked a
-- table and indexes swollen by them. Now the ack deletes the row from jobs and inserts what
-- inspection shows of it into succeeded_jobs: insert-only, two indexes (the id, for get_jobs
-- and duplicate ids; finished_at, for the prune). jobs holds only jobs still to run, running
-- or dead.
--
-- An id is unique across both tables: an enqueue inserts into jobs first (waiting for an ack
-- that is moving the same id) and then looks the ids up in succeeded_jobs in a new statement,
-- which sees that ack's row (queries.sql: succeeded_ids, job_drop_if_succeeded). The queue of
-- a succeeded job is its tenant row's: a tenant is kept while it has succeeded jobs (kept).

CREATE TABLE {schema}.succeeded_jobs (
    id           text PRIMARY KEY,
    seq          bigint NOT NULL,
    tenant_id    bigint NOT NULL,
    priority     integer NOT NULL,
    attempts     integer NOT NULL,
    max_attempts integer NOT NULL,
    enqueued_at  double precision NOT NULL,
    run_at       double precision NOT NULL,
    started_at   double precision,
    finished_at  double precision,
    name         text NOT NULL,
    payload      text NOT NULL,
    last_error   text
);

INSERT INTO {schema}.succeeded_jobs (
    id, seq, tenant_id, priority, attempts, max_attempts, enqueued_at, run_at, started_at,
    finished_at, name, payload, last_error
)
SELECT id, seq, tenant_id, priority, attempts, max_attempts, enqueued_at, run_at, started_at,
       finished_at, name, payload, last_error
FROM {schema}.jobs WHERE state = 'succeeded';

DELETE FROM {schema}.jobs WHERE state = 'succeeded';

DROP INDEX {schema}.jobs_succeeded;

CREATE INDEX succeeded_jobs_finished ON {schema}.succeeded_jobs (finished_at);

-- The product of a tiny usage and a tiny factor, 0 where PostgreSQL raises "underflow" (IEEE
-- arithmetic, and Python, give 0): decayed's rare path, in plpgsql for its exception block.
CREATE FUNCTION {schema}.decayed_product(
    p_usage double precision, p_factor double precision
) RETURNS double precision LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN p_usage * p_factor;
EXCEPTION WHEN numeric_value_out_of_range THEN
    RETURN 0.0::double precision;
END
$$;

-- history.decayed(usage, since, now, half_life) with Python's results: usage * 0.5 ** ((now -
-- since) / half_life), 0 where that rounds to 0. An SQL function, so the planner inlines it
-- into the statements and expressions that call it (schema 8; it was a plpgsql call each
-- time); only a product near the smallest double goes to decayed_product.
CREATE OR REPLACE FUNCTION {schema}.decayed(
    p_usage double precision, p_since double precision, p_now double precision,
    p_half_life double precision
) RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN p_now <= p_since THEN p_usage
        WHEN p_usage = 0 OR (p_now - p_since) / p_half_life >= 1075  -- 0.5 ** 1075 rounds to 0
            THEN 0.0::double precision
        WHEN ln(p_usage) + ln(power(0.5::double precision, (p_now - p_since) / p_half_life))
             > -740  -- the product is far above the smallest double
            THEN p_usage * power(0.5::double precision, (p_now - p_since) / p_half_life)
        ELSE {schema}.decayed_product(
            p_usage, power(0.5::double precision, (p_now - p_since) / p_half_life))
    END
$$;

-- Acks of several leases in one statement, exactly as acking each (id, lease) in the order
-- given, in one transaction: one status per pair, 'ok', 'not_found' (unknown, finished, or
-- another lease) or 'expired'; nothing changes for a lease that is not 'ok'. Locks in the
-- order of queries.sql: the queues' shared locks by key, the jobs by seq, their tenants by id.
-- NOTIFYs a queue when a freed slot makes a capped tenant with ready jobs eligible again.
-- Each job is moved to succeeded_jobs in one statement; the tenants are updated together.
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
    v_queues text[] := ARRAY[]::text[];
    v_done integer;
    a record;
    j record;
    t record;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see 0003_hot_paths.sql
    PERFORM pg_advisory_xact_lock_shared(s.k)
    FROM (SELECT DISTINCT hashtextextended(x.queue, p_seed) AS k
          FROM {schema}.jobs x WHERE x.id = ANY(p_ids)) s
    ORDER BY s.k;
    -- the jobs, in seq order: running -> succeeded (moved to succeeded_jobs) if the lease is
    -- held and not over
    FOR a IN
        SELECT x.seq, p.lease, p.ord
        FROM unnest(p_ids, p_leases) WITH ORDINALITY AS p(id, lease, ord)
        CROSS JOIN LATERAL (  -- one probe of the id index each, whatever the table's size
            SELECT y.seq FROM {schema}.jobs y WHERE y.id = p.id LIMIT 1) x
        ORDER BY x.seq, p.ord
    LOOP
        WITH moved AS (
            DELETE FROM {schema}.jobs x
            WHERE x.seq = a.seq AND x.state = 'running' AND x.leases = a.lease
              AND p_now < x.deadline
            RETURNING x.*
        ), kept AS (
            INSERT INTO {schema}.succeeded_jobs (
                id, seq, tenant_id, priority, attempts, max_attempts, enqueued_at, run_at,
                started_at, finished_at, name, payload, last_error)
            SELECT m.id, m.seq, m.tenant_id, m.priority, m.attempts, m.max_attempts,
                   m.enqueued_at, m.run_at, m.started_at, p_now, m.name, m.payload,
                   m.last_error
            FROM moved m
        )
        SELECT m.tenant_id, m.started_at, m.charged, m.queue INTO j FROM moved m;
        IF FOUND THEN
            v_statuses[a.ord::integer] := 'ok';
            v_ords := v_ords || a.ord::integer;
            v_tenants := v_tenants || j.tenant_id;
            v_started := v_started || j.started_at;
            v_charged := v_charged || j.charged;
            v_queues := v_queues || j.queue;
        ELSIF EXISTS (SELECT 1 FROM {schema}.jobs x WHERE x.seq = a.seq
                      AND x.state = 'running' AND x.leases = a.lease) THEN
            v_statuses[a.ord::integer] := 'expired';
        END IF;
    END LOOP;
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

-- Hands out up to p_limit head jobs, each of the eligible tenant with the smallest
-- (start_tag, head_seq), trying p_queues in order. The caller holds the queues' exclusive
-- locks: no other transaction writes these tenants or their ready jobs meanwhile, so the
-- rows need no row locks (and SKIP LOCKED would skip the order we must keep). The arithmetic
-- is fairness.finish_after_dispatch, history.add_usage and rate.after_start / limited_until,
-- in their order; V = S is stored when the call moves on to another queue or ends. Each pick
-- and its job's start are one statement (schema 8), the tenant's update a second.
CREATE OR REPLACE FUNCTION {schema}.dispatch(
    p_queues text[], p_worker text, p_now double precision, p_limit integer
) RETURNS TABLE (
    l_id text, l_name text, l_queue text, l_tenant text, l_payload text, l_attempts integer,
    l_leases integer, l_max_attempts integer, l_started_at double precision,
    l_deadline double precision, l_lease_timeout double precision, l_cost double precision
) LANGUAGE plpgsql AS $$
DECLARE
    t record;  -- the picked tenant (as read) and its head job (as started)
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
        UPDATE {schema}.jobs j
        SET state = 'running', attempts = j.attempts + 1, leases = j.leases + 1,
            started_at = p_now, deadline = p_now + j.lease_timeout, worker_id = p_worker,
            charged = j.cost
        FROM (
            SELECT e.* FROM unnest(p_queues) WITH ORDINALITY AS q(name, ord)
            CROSS JOIN LATERAL (
                SELECT * FROM {schema}.tenants x
                WHERE x.queue = q.name AND x.start_tag IS NOT NULL
                ORDER BY x.start_tag, x.head_seq
                LIMIT 1
            ) e
            ORDER BY q.ord
            LIMIT 1
        ) p
        WHERE j.seq = p.head_seq
        RETURNING p.id, p.queue, p.tenant, p.weight, p.max_running, p.finish_tag, p.start_tag,
                  p.ready, p.running, p.rate_count, p.rate_period, p.rate_burst, p.tat,
                  p.usage, p.usage_at, j.seq AS j_seq, j.id AS j_id, j.name AS j_name,
                  j.payload AS j_payload, j.priority AS j_priority, j.attempts AS j_attempts,
                  j.leases AS j_leases, j.max_attempts AS j_max_attempts,
                  j.started_at AS j_started_at, j.deadline AS j_deadline,
                  j.lease_timeout AS j_lease_timeout, j.cost AS j_cost
        INTO t;
        IF NOT FOUND THEN
            -- no eligible tenant; or, were one left, its head job was not there: a bug
            IF EXISTS (SELECT 1 FROM unnest(p_queues) AS q(name)
                       WHERE EXISTS (SELECT 1 FROM {schema}.tenants x
                                     WHERE x.queue = q.name AND x.start_tag IS NOT NULL)) THEN
                RAISE EXCEPTION 'fairq: an eligible tenant''s head job is missing';
            END IF;
            EXIT;
        END IF;

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
        v_finish := t.start_tag + t.j_cost / t.weight;
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
            -- the next head: the first ready job after j in (priority DESC, seq) order, found
            -- from j onwards, so the index entries of jobs already handed out (dead until
            -- vacuum reaches them, and all before j) are not walked over again
            head_seq = coalesce(
                (SELECT r.seq FROM {schema}.jobs r
                 WHERE r.tenant_id = t.id AND r.state = 'ready'
                   AND r.priority = t.j_priority AND r.seq > t.j_seq
                 ORDER BY r.priority DESC, r.seq
                 LIMIT 1),
                (SELECT r.seq FROM {schema}.jobs r
                 WHERE r.tenant_id = t.id AND r.state = 'ready' AND r.priority < t.j_priority
                 ORDER BY r.priority DESC, r.seq
                 LIMIT 1))
        WHERE x.id = t.id AND (x.max_running IS NULL OR x.running < x.max_running);
        IF NOT FOUND THEN
            RAISE EXCEPTION 'fairq: tenant row % refused a slot over its cap', t.id;
        END IF;

        l_id := t.j_id; l_name := t.j_name; l_queue := t.queue; l_tenant := t.tenant;
        l_payload := t.j_payload; l_attempts := t.j_attempts; l_leases := t.j_leases;
        l_max_attempts := t.j_max_attempts; l_started_at := t.j_started_at;
        l_deadline := t.j_deadline; l_lease_timeout := t.j_lease_timeout; l_cost := t.j_cost;
        RETURN NEXT;
        v_taken := v_taken + 1;
    END LOOP;
    IF v_queue IS NOT NULL THEN
        UPDATE {schema}.queues SET vclock = v_vclock WHERE name = v_queue;
    END IF;
END
$$;
