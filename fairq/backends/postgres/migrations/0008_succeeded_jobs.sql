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
-- The hot paths also run fewer statements a job: ack_many updates its tenants in one UPDATE per
-- round (one round unless a tenant has several leases in the batch) instead of one per lease;
-- decayed is an SQL function the planner inlines instead of a plpgsql call per use (dispatch
-- and ack). The arithmetic is unchanged.
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
