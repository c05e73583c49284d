-- fairq PostgreSQL schema: the whole current schema in one file, for reading.
--
-- It must equal what applying migrations/0001… in order gives; tests/postgres/test_migrations.py
-- compares the catalogs of both. A change to the schema is a new migration plus the same
-- change here. {schema} is replaced by the quoted schema name.

CREATE SCHEMA IF NOT EXISTS {schema};

CREATE TABLE {schema}.fairq_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- One row per queue: the defaults its tenants inherit, and its virtual clock V. Dispatches in
-- one queue are serialised by a transaction-scoped advisory lock keyed on (schema, queue), not
-- by a lock on this row, so readers of V (enqueue, ack) can share it without MultiXacts.
CREATE TABLE {schema}.queues (
    name        text COLLATE "C" PRIMARY KEY,
    weight      double precision NOT NULL DEFAULT 1.0 CHECK (weight > 0),
    max_running integer CHECK (max_running >= 1),   -- NULL: no cap
    vclock      double precision NOT NULL DEFAULT 0.0,
    rate_count  integer CHECK (rate_count >= 1),      -- NULL: no rate limit
    rate_period double precision CHECK (rate_period > 0),
    rate_burst  integer CHECK (rate_burst >= 1),
    half_life   double precision CHECK (half_life > 0), -- NULL: no history
    max_debt    double precision NOT NULL DEFAULT 60.0
);

-- One row per (queue, tenant). weight/max_running are the effective settings (own setting,
-- else the queue's default), kept current by set_queue so dispatch never joins queues.
-- start_tag is NULL exactly when the tenant is not eligible; head_seq is its ready head.
-- tenant_key is sha256(tenant): tenant ids have no length limit but btree entries do, so the
-- unique index holds the digest and lookups compare the full text as well.
CREATE TABLE {schema}.tenants (
    id              bigserial PRIMARY KEY,
    queue           text COLLATE "C" NOT NULL,
    tenant          text COLLATE "C" NOT NULL,
    tenant_key      bytea NOT NULL,
    own_weight      double precision,               -- NULL: the queue's default
    own_max_running integer,                        -- NULL: the queue's default
    weight          double precision NOT NULL,
    max_running     integer,                        -- NULL: no cap
    finish_tag      double precision NOT NULL DEFAULT 0.0,
    start_tag       double precision,
    head_seq        bigint,
    ready           bigint NOT NULL DEFAULT 0 CHECK (ready >= 0),
    scheduled       bigint NOT NULL DEFAULT 0 CHECK (scheduled >= 0),
    running         bigint NOT NULL DEFAULT 0 CHECK (running >= 0),
    succeeded       bigint NOT NULL DEFAULT 0,
    failed          bigint NOT NULL DEFAULT 0,
    dead            bigint NOT NULL DEFAULT 0 CHECK (dead >= 0),
    own_rate_count  integer,                        -- NULL: the queue's default
    own_rate_period double precision,
    own_rate_burst  integer,
    rate_count      integer,                        -- effective; NULL: no rate limit
    rate_period     double precision,
    rate_burst      integer,
    tat             double precision,               -- GCRA theoretical arrival time
    limited_until   double precision,               -- set while waiting on its rate
    usage           double precision NOT NULL DEFAULT 0.0,  -- recent service, decaying
    usage_at        double precision NOT NULL DEFAULT 0.0,
    kept            bigint NOT NULL DEFAULT 0 CHECK (kept >= 0),  -- succeeded jobs stored
    UNIQUE (queue, tenant_key)
);

-- Dispatch reads the first entry: smallest (start tag, head seq) among eligible tenants.
CREATE INDEX tenants_eligible ON {schema}.tenants (queue, start_tag, head_seq)
    WHERE start_tag IS NOT NULL;

-- Maintenance ends rate limits in (limited_until, tenant) order: a range of this index, the
-- ties sorted by the tenant text (COLLATE "C": UTF-8 byte order, which is code-point order).
-- The tenant text is not an index column: btree entries are limited in size, tenant ids not.
CREATE INDEX tenants_limited ON {schema}.tenants (queue, limited_until)
    WHERE limited_until IS NOT NULL;

-- seq is enqueue order (a sequence value is never reused, even after pruning). tenant_id names
-- the (queue, tenant) row, so a long tenant id is stored once, not in every job. Since schema 8
-- a succeeded job is moved to succeeded_jobs by its ack, so no row here is 'succeeded' (the
-- CHECK still names the state, as version 1 made it).
CREATE TABLE {schema}.jobs (
    seq           bigserial PRIMARY KEY,
    id            text NOT NULL UNIQUE,
    tenant_id     bigint NOT NULL,
    queue         text COLLATE "C" NOT NULL,
    name          text NOT NULL,
    state         text NOT NULL
                  CHECK (state IN ('scheduled', 'ready', 'running', 'succeeded', 'dead')),
    payload       text NOT NULL,
    priority      integer NOT NULL,
    attempts      integer NOT NULL DEFAULT 0,
    max_attempts  integer NOT NULL,
    lease_timeout double precision NOT NULL,
    cost          double precision NOT NULL,
    enqueued_at   double precision NOT NULL,
    run_at        double precision NOT NULL,
    ready_at      double precision,                -- when it last became ready
    started_at    double precision,
    deadline      double precision,                -- set only while running
    finished_at   double precision,
    last_error    text,
    worker_id     text,
    leases        integer NOT NULL DEFAULT 0,      -- dispatches so far; names the lease
    charged       double precision NOT NULL DEFAULT 0.0  -- what this run was charged so far
);

CREATE INDEX jobs_ready ON {schema}.jobs (tenant_id, priority DESC, seq) WHERE state = 'ready';
CREATE INDEX jobs_scheduled ON {schema}.jobs (queue, run_at, seq) WHERE state = 'scheduled';
CREATE INDEX jobs_running ON {schema}.jobs (queue, deadline, seq) WHERE state = 'running';
CREATE INDEX jobs_dead ON {schema}.jobs (finished_at, seq) WHERE state = 'dead';

-- Succeeded jobs, kept for the retention (get_jobs, duplicate ids), moved here by the ack:
-- insert-only; the queue is the tenant row's (see migrations/0008_succeeded_jobs.sql).
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

CREATE INDEX succeeded_jobs_finished ON {schema}.succeeded_jobs (finished_at);

-- Job declarations published by workers, so producers can enqueue by name alone.
CREATE TABLE {schema}.job_types (
    name          text PRIMARY KEY,
    queue         text NOT NULL,
    tenant_arg    text,
    params        text[] NOT NULL,                -- positional parameter names, in order
    max_attempts  integer NOT NULL,
    lease_timeout double precision NOT NULL,
    cost          double precision NOT NULL,
    throttle      text NOT NULL DEFAULT '[]'      -- [{"threshold", "per", "queue"}, …] as JSON
);

-- Enqueues made inside the caller's transaction wait here until a dispatch of their queue takes
-- them in (see migrations/0002_inbox.sql and transactional.py).
CREATE TABLE {schema}.inbox (
    seq           bigint PRIMARY KEY DEFAULT nextval('{schema}.jobs_seq_seq'),
    id            text NOT NULL UNIQUE,
    queue         text COLLATE "C" NOT NULL,
    tenant        text COLLATE "C" NOT NULL,
    name          text NOT NULL,
    payload       text NOT NULL,
    priority      integer NOT NULL,
    max_attempts  integer NOT NULL,
    lease_timeout double precision NOT NULL,
    cost          double precision NOT NULL,
    enqueued_at   double precision NOT NULL,
    run_at        double precision NOT NULL
);

CREATE INDEX inbox_queue ON {schema}.inbox (queue, seq);

-- Throttle windows: the newest enqueue times per (job name, tenant), at most max threshold + 1,
-- deleted once older than the longest rule's window (see migrations/0004_limits.sql).
CREATE TABLE {schema}.throttle_windows (
    key        bytea PRIMARY KEY,
    name       text NOT NULL,
    tenant     text COLLATE "C" NOT NULL,
    times      double precision[] NOT NULL,
    span       double precision NOT NULL,
    last_at    double precision NOT NULL,
    expires_at double precision NOT NULL
);

CREATE INDEX throttle_windows_expiry ON {schema}.throttle_windows (expires_at);

-- The hottest events server-side, one round trip each (see migrations/0003_hot_paths.sql,
-- 0004_limits.sql, 0006_lean_hot_paths.sql and 0009_ack_dequeue.sql).

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
CREATE FUNCTION {schema}.decayed(
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

-- Hands out up to p_limit head jobs, each of the eligible tenant with the smallest
-- (start_tag, head_seq), trying p_queues in order. The caller holds the queues' exclusive
-- locks: no other transaction writes these tenants or their ready jobs meanwhile, so the
-- rows need no row locks (and SKIP LOCKED would skip the order we must keep). The arithmetic
-- is fairness.finish_after_dispatch, history.add_usage and rate.after_start / limited_until,
-- in their order, pick after pick; V = S of the last pick of each queue.
--
-- Set-wise (schema 8): a round reads the k smallest eligible tenants of a queue (k = what is
-- left to hand out, at most 64) with their head jobs, and makes up to k picks among them in
-- memory. That is exact: a tenant not read has a key at or above the k-th one read, and while
-- fewer than k picks are made, some tenant read is still unpicked, with a key at or below it.
-- A pick reads only its tenant's next head (one index probe); the round writes the tenants it
-- changed in one UPDATE, and the call starts all its jobs in one UPDATE at the end.
-- A head job is read by its key alone, and no statement here may scan a table: a plan cached
-- while the tables were tiny must still be a key lookup once they are large (schema 11).
CREATE FUNCTION {schema}.dispatch(
    p_queues text[], p_worker text, p_now double precision, p_limit integer
) RETURNS TABLE (
    l_id text, l_name text, l_queue text, l_tenant text, l_payload text, l_attempts integer,
    l_leases integer, l_max_attempts integer, l_started_at double precision,
    l_deadline double precision, l_lease_timeout double precision, l_cost double precision
) LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    v_cands {schema}.tenants[];  -- the round's tenants, changed in memory pick by pick
    v_prios integer[];            -- each one's head job: its priority and cost
    v_costs double precision[];
    v_picked integer[];           -- picks per tenant in this round
    v_starts double precision[];  -- their keys (start_tag, head_seq), for the picks
    v_heads bigint[];
    v_seqs bigint[] := ARRAY[]::bigint[];  -- the jobs handed out, in order
    v_names text[] := ARRAY[]::text[];     -- and their tenants
    t {schema}.tenants%ROWTYPE;
    v_queue text;
    v_half_life double precision;
    v_vclock double precision;
    v_want integer;
    v_n integer;
    v_best integer;
    v_round integer;
    v_next bigint;
    v_next_prio integer;
    v_next_cost double precision;
    v_finish double precision;
    v_interval double precision;
    v_until double precision;
    v_taken integer := 0;
    v_changed integer;            -- tenants picked in this round
    v_written integer;
BEGIN
    FOREACH v_queue IN ARRAY p_queues LOOP
        v_vclock := NULL;
        WHILE v_taken < p_limit LOOP
            v_want := LEAST(p_limit - v_taken, 64);
            SELECT array_agg(c.x ORDER BY c.ord), array_agg(c.priority ORDER BY c.ord),
                   array_agg(c.cost ORDER BY c.ord), array_agg(c.start_tag ORDER BY c.ord),
                   array_agg(c.head_seq ORDER BY c.ord),
                   (SELECT coalesce(q.half_life, 60.0::double precision)
                    FROM {schema}.queues q WHERE q.name = v_queue)
            INTO v_cands, v_prios, v_costs, v_starts, v_heads, v_half_life
            FROM (SELECT x, CASE WHEN h.state = 'ready' THEN h.priority END AS priority,
                         h.cost, x.start_tag, x.head_seq,
                         row_number() OVER (ORDER BY x.start_tag, x.head_seq) AS ord
                  FROM {schema}.tenants x
                  LEFT JOIN LATERAL (
                      SELECT j.priority, j.cost, j.state FROM {schema}.jobs j
                      WHERE j.seq = x.head_seq OFFSET 0) h ON true
                  WHERE x.queue = v_queue AND x.start_tag IS NOT NULL
                  ORDER BY x.start_tag, x.head_seq
                  LIMIT v_want) c;
            EXIT WHEN v_cands IS NULL;
            v_n := cardinality(v_cands);
            IF array_position(v_prios, NULL) IS NOT NULL THEN
                RAISE EXCEPTION 'fairq: an eligible tenant''s head job in % is not ready', v_queue;
            END IF;
            v_picked := array_fill(0, ARRAY[v_n]);
            v_changed := 0;
            v_round := 0;
            -- at most v_n picks while tenants were left unread (see above)
            WHILE v_taken < p_limit AND (v_n < v_want OR v_round < v_n) LOOP
                v_best := NULL;
                FOR i IN 1..v_n LOOP
                    IF v_starts[i] IS NOT NULL AND (v_best IS NULL
                        OR (v_starts[i], v_heads[i]) < (v_starts[v_best], v_heads[v_best])) THEN
                        v_best := i;
                    END IF;
                END LOOP;
                EXIT WHEN v_best IS NULL;
                t := v_cands[v_best];
                IF t.head_seq IS NULL THEN
                    RAISE EXCEPTION 'fairq: eligible tenant row % has no head job', t.id;
                END IF;
                v_seqs := v_seqs || t.head_seq;
                v_names := v_names || t.tenant;
                -- the next head: the first ready job after this one in (priority DESC, seq)
                -- order, found from it onwards, so the index entries of jobs already handed
                -- out (dead until vacuum reaches them, and all before it) are not walked again
                -- (SELECT INTO sets v_next to NULL when there is none)
                SELECT r.seq, r.priority, r.cost INTO v_next, v_next_prio, v_next_cost
                FROM {schema}.jobs r
                WHERE r.tenant_id = t.id AND r.state = 'ready'
                  AND r.priority = v_prios[v_best] AND r.seq > t.head_seq
                ORDER BY r.priority DESC, r.seq
                LIMIT 1;
                IF v_next IS NULL THEN
                    SELECT r.seq, r.priority, r.cost INTO v_next, v_next_prio, v_next_cost
                    FROM {schema}.jobs r
                    WHERE r.tenant_id = t.id AND r.state = 'ready'
                      AND r.priority < v_prios[v_best]
                    ORDER BY r.priority DESC, r.seq
                    LIMIT 1;
                END IF;
                -- V = S; F = S + estimate / w
                v_vclock := t.start_tag;
                v_finish := t.start_tag + v_costs[v_best] / t.weight;
                -- usage = max(decayed(usage, usage_at, now) + (F_new - F_old), 0)
                t.usage := GREATEST(
                    {schema}.decayed(t.usage, t.usage_at, p_now, v_half_life)
                    + (v_finish - t.finish_tag),
                    0.0::double precision);
                t.usage_at := GREATEST(t.usage_at, p_now);
                t.finish_tag := v_finish;
                -- GCRA: tat = max(tat, now) + interval; limited until tat - tolerance if after now
                v_until := NULL;
                IF t.rate_count IS NOT NULL THEN
                    v_interval := t.rate_period / t.rate_count;
                    IF t.tat IS NULL THEN
                        t.tat := p_now + v_interval;
                    ELSE
                        t.tat := GREATEST(t.tat, p_now) + v_interval;
                    END IF;
                    IF t.tat - v_interval * (t.rate_burst - 1) > p_now THEN
                        v_until := t.tat - v_interval * (t.rate_burst - 1);
                    END IF;
                END IF;
                t.limited_until := v_until;
                t.ready := t.ready - 1;
                t.running := t.running + 1;
                -- then S = F while still eligible
                t.start_tag := CASE WHEN t.ready > 0
                    AND (t.max_running IS NULL OR t.running < t.max_running)
                    AND t.weight > 0 AND v_until IS NULL THEN v_finish END;
                t.head_seq := v_next;
                v_cands[v_best] := t;
                v_starts[v_best] := t.start_tag;
                v_heads[v_best] := t.head_seq;
                v_prios[v_best] := v_next_prio;
                v_costs[v_best] := v_next_cost;
                IF v_picked[v_best] = 0 THEN
                    v_changed := v_changed + 1;
                END IF;
                v_picked[v_best] := v_picked[v_best] + 1;
                v_taken := v_taken + 1;
                v_round := v_round + 1;
            END LOOP;
            -- the round's tenants, as the picks left them; a slot is never taken over a cap
            UPDATE {schema}.tenants x
            SET finish_tag = d.finish_tag, start_tag = d.start_tag, usage = d.usage,
                usage_at = d.usage_at, tat = d.tat, limited_until = d.limited_until,
                head_seq = d.head_seq, ready = x.ready - p.picks, running = x.running + p.picks
            FROM unnest(v_cands) WITH ORDINALITY AS d
            JOIN unnest(v_picked) WITH ORDINALITY AS p(picks, ord) ON p.ord = d.ordinality
            WHERE x.id = d.id AND p.picks > 0
              AND (x.max_running IS NULL OR x.running + p.picks <= x.max_running);
            GET DIAGNOSTICS v_written = ROW_COUNT;
            IF v_written < v_changed THEN
                RAISE EXCEPTION 'fairq: a tenant of queue % refused a slot over its cap', v_queue;
            END IF;
            EXIT WHEN v_n < v_want;  -- every eligible tenant was read: none is left
        END LOOP;
        IF v_vclock IS NOT NULL THEN
            UPDATE {schema}.queues SET vclock = v_vclock WHERE name = v_queue;
        END IF;
    END LOOP;
    RETURN QUERY
    WITH started AS (
        UPDATE {schema}.jobs j
        SET state = 'running', attempts = j.attempts + 1, leases = j.leases + 1,
            started_at = p_now, deadline = p_now + j.lease_timeout, worker_id = p_worker,
            charged = j.cost
        WHERE j.seq = ANY(v_seqs)
        RETURNING j.seq, j.id, j.name, j.queue, j.payload, j.attempts, j.leases,
                  j.max_attempts, j.started_at, j.deadline, j.lease_timeout, j.cost
    )
    SELECT s.id, s.name, s.queue, o.tenant, s.payload, s.attempts, s.leases, s.max_attempts,
           s.started_at, s.deadline, s.lease_timeout, s.cost
    FROM unnest(v_seqs, v_names) WITH ORDINALITY AS o(seq, tenant, ord)
    JOIN started s ON s.seq = o.seq
    ORDER BY o.ord;
END
$$;

-- A whole dequeue when no maintenance is due: lock the queues, check that nothing is due
-- (a due scheduled job, an overdue lease, a rate limit that is over, an inbox row), dispatch.
-- When something is due it returns one row with due = true and changes nothing; the caller
-- then runs maintenance in Python and calls dispatch() in the same transaction.
CREATE FUNCTION {schema}.dequeue(
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

-- Ack of one held lease: ack_many of it, with the deadline when it is 'expired'.
CREATE FUNCTION {schema}.ack(
    p_id text, p_lease integer, p_now double precision, p_seed bigint, p_channel_salt text
) RETURNS TABLE (status text, lease_deadline double precision)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan
    SET enable_seqscan = off AS $$
BEGIN
    status := ({schema}.ack_many(ARRAY[p_id], ARRAY[p_lease], p_now, p_seed, p_channel_salt))[1];
    IF status = 'expired' THEN
        SELECT x.deadline INTO lease_deadline FROM {schema}.jobs x WHERE x.id = p_id;
    END IF;
    RETURN NEXT;
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

-- ack_many: the queues' shared locks (by key, as queries.sql), then ack_held.
CREATE FUNCTION {schema}.ack_many(
    p_ids text[], p_leases integer[], p_now double precision, p_seed bigint,
    p_channel_salt text
) RETURNS text[]
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan
    SET enable_seqscan = off AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see 0003_hot_paths.sql
    PERFORM pg_advisory_xact_lock_shared(s.k)
    FROM (SELECT DISTINCT hashtextextended(x.queue, p_seed) AS k
          FROM {schema}.jobs x WHERE x.id = ANY(p_ids)) s
    ORDER BY s.k;
    RETURN {schema}.ack_held(p_ids, p_leases, p_now, p_channel_salt);
END
$$;

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
-- limit that is over, or an inbox row. The caller holds the queues' exclusive locks. In
-- plpgsql so its plan is cached. Each probe reads its index only up to p_now (schema 12): a
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
               ORDER BY t.limited_until LIMIT 1) IS NOT NULL
           OR (SELECT i.seq FROM {schema}.inbox i
               WHERE i.queue = n ORDER BY i.seq LIMIT 1) IS NOT NULL);
END
$$;

-- ack_many(p_ids, p_leases, p_ack_now) then dequeue(p_queues, …, p_now, p_limit), atomically,
-- in one statement. The first row carries ack_many's statuses; the leases follow, in the order
-- dispatch hands them out. When maintenance is due: one row, due = true, nothing changed.
-- Checking before the acks is exact: an ack never makes maintenance due (it adds no scheduled
-- job, rate limit or inbox row), so "not due" before them is "not due" after them. The acks
-- go through ack_exclusive (0010_exclusive_acks.sql).
CREATE FUNCTION {schema}.ack_dequeue(
    p_ids text[], p_leases integer[], p_ack_now double precision, p_queues text[],
    p_worker text, p_now double precision, p_limit integer, p_seed bigint,
    p_channel_salt text
) RETURNS TABLE (
    statuses text[], due boolean, l_id text, l_name text, l_queue text, l_tenant text,
    l_payload text, l_attempts integer, l_leases integer, l_max_attempts integer,
    l_started_at double precision, l_deadline double precision,
    l_lease_timeout double precision, l_cost double precision
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan
    SET enable_seqscan = off AS $$
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
