-- fairq PostgreSQL schema, version 4: rate limits, history, charging as jobs run, throttling.
--
-- * Lease tokens name the job's lease count (jobs.leases: +1 per dispatch, never decremented),
--   so a lease handed back by release is never the same token as the next one. Existing jobs
--   start at leases = attempts, so a lease held across the upgrade keeps its token.
-- * jobs.charged: what the current run has been charged (the estimate at dispatch, raised by
--   heartbeats); a run held across the upgrade was charged its estimate.
-- * Rate limits (GCRA): the queue default and the tenant's own setting, the effective one kept
--   current on the tenant row like weight and max_running; tat and limited_until per tenant.
--   A limited tenant is out of tenants_eligible and in tenants_limited until limited_until.
-- * usage / usage_at: the tenant's recent service, decaying (fairq/policy/history.py).
-- * throttle_windows: the newest enqueue times per (job name, tenant), at most
--   max threshold + 1 of them, deleted once older than the longest rule's window.
-- * job_types.throttle: published throttle rules, as JSON.

ALTER TABLE {schema}.queues
    ADD COLUMN rate_count  integer CHECK (rate_count >= 1),      -- NULL: no rate limit
    ADD COLUMN rate_period double precision CHECK (rate_period > 0),
    ADD COLUMN rate_burst  integer CHECK (rate_burst >= 1),
    ADD COLUMN half_life   double precision CHECK (half_life > 0), -- NULL: no history
    ADD COLUMN max_debt    double precision NOT NULL DEFAULT 60.0;

ALTER TABLE {schema}.tenants
    ADD COLUMN own_rate_count  integer,                 -- NULL: the queue's default
    ADD COLUMN own_rate_period double precision,
    ADD COLUMN own_rate_burst  integer,
    ADD COLUMN rate_count      integer,                 -- effective; NULL: no rate limit
    ADD COLUMN rate_period     double precision,
    ADD COLUMN rate_burst      integer,
    ADD COLUMN tat             double precision,        -- GCRA theoretical arrival time
    ADD COLUMN limited_until   double precision,        -- set while waiting on its rate
    ADD COLUMN usage           double precision NOT NULL DEFAULT 0.0,
    ADD COLUMN usage_at        double precision NOT NULL DEFAULT 0.0;

UPDATE {schema}.tenants t SET rate_count = q.rate_count, rate_period = q.rate_period,
    rate_burst = q.rate_burst
FROM {schema}.queues q WHERE q.name = t.queue AND q.rate_count IS NOT NULL;

-- Maintenance ends rate limits in (limited_until, tenant) order: a range of this index, the
-- ties sorted by the tenant text (COLLATE "C": UTF-8 byte order, which is code-point order).
-- The tenant text is not an index column because btree entries are limited in size and
-- tenant ids are not (the same reason tenants_key holds a digest).
CREATE INDEX tenants_limited ON {schema}.tenants (queue, limited_until)
    WHERE limited_until IS NOT NULL;

ALTER TABLE {schema}.jobs
    ADD COLUMN leases  integer NOT NULL DEFAULT 0,
    ADD COLUMN charged double precision NOT NULL DEFAULT 0.0;

UPDATE {schema}.jobs SET leases = attempts WHERE attempts <> 0;
UPDATE {schema}.jobs SET charged = cost WHERE state = 'running';

ALTER TABLE {schema}.job_types
    ADD COLUMN throttle text NOT NULL DEFAULT '[]';  -- [{"threshold", "per", "queue"}, …]

-- One row per (job name, tenant) that has throttle rules. key is sha256 of both (see
-- throttling.py); times holds at most max threshold + 1 values; expires_at = last_at + span.
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

-- The server-side functions change with the rules (leases, weight 0, rates, usage): replaced.
DROP FUNCTION {schema}.dequeue(text[], bigint, text, double precision, integer);
DROP FUNCTION {schema}.dispatch(text[], text, double precision, integer);
DROP FUNCTION {schema}.ack(text, integer, double precision, bigint, text);

-- history.decayed(usage, since, now, half_life) with Python's results: PostgreSQL raises
-- "underflow" where IEEE arithmetic (and Python) give 0, so a result that rounds to 0 is
-- returned as 0 instead (never on the usual path: an exception block only for tiny products).
CREATE FUNCTION {schema}.decayed(
    p_usage double precision, p_since double precision, p_now double precision,
    p_half_life double precision
) RETURNS double precision LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    v_exponent double precision;
    v_factor double precision;
BEGIN
    IF p_now <= p_since THEN
        RETURN p_usage;
    END IF;
    v_exponent := (p_now - p_since) / p_half_life;
    IF p_usage = 0 OR v_exponent >= 1075 THEN  -- 0.5 ** 1075 rounds to 0
        RETURN 0.0::double precision;
    END IF;
    v_factor := power(0.5::double precision, v_exponent);
    IF ln(p_usage) + ln(v_factor) > -740 THEN  -- the product is far above the smallest double
        RETURN p_usage * v_factor;
    END IF;
    BEGIN
        RETURN p_usage * v_factor;
    EXCEPTION WHEN numeric_value_out_of_range THEN
        RETURN 0.0::double precision;
    END;
END
$$;

-- Hands out up to p_limit head jobs, each of the eligible tenant with the smallest
-- (start_tag, head_seq), trying p_queues in order. The caller holds the queues' exclusive
-- locks: no other transaction writes these tenants or their ready jobs meanwhile, so the
-- rows need no row locks (and SKIP LOCKED would skip the order we must keep). The arithmetic
-- is fairness.finish_after_dispatch, history.add_usage and rate.after_start / limited_until,
-- in their order.
CREATE FUNCTION {schema}.dispatch(
    p_queues text[], p_worker text, p_now double precision, p_limit integer
) RETURNS TABLE (
    l_id text, l_name text, l_queue text, l_tenant text, l_payload text, l_attempts integer,
    l_leases integer, l_max_attempts integer, l_started_at double precision,
    l_deadline double precision, l_lease_timeout double precision, l_cost double precision
) LANGUAGE plpgsql AS $$
DECLARE
    t {schema}.tenants%ROWTYPE;
    j {schema}.jobs%ROWTYPE;
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

        -- V = S; F = S + estimate / w
        UPDATE {schema}.queues SET vclock = t.start_tag WHERE name = t.queue
        RETURNING coalesce(half_life, 60.0::double precision) INTO v_half_life;
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
) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see 0003_hot_paths.sql
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
           OR (SELECT t.limited_until FROM {schema}.tenants t
               WHERE t.queue = n AND t.limited_until IS NOT NULL
               ORDER BY t.limited_until LIMIT 1) <= p_now
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

-- Ack of a held lease: 'ok', 'not_found' (unknown, finished, or another lease) or 'expired'
-- (with the deadline); nothing changes unless 'ok'. Locks: the queue's shared lock, the job,
-- then its tenant (the order of queries.sql). NOTIFYs the queue when the freed slot makes a
-- capped tenant with ready jobs eligible again.
CREATE FUNCTION {schema}.ack(
    p_id text, p_lease integer, p_now double precision, p_seed bigint, p_channel_salt text
) RETURNS TABLE (status text, lease_deadline double precision)
LANGUAGE plpgsql AS $$
DECLARE
    v_queue text;
    j {schema}.jobs%ROWTYPE;
    t {schema}.tenants%ROWTYPE;
    v_vclock double precision;
    v_half_life double precision;
    v_finish double precision;
    v_usage double precision;
    v_was_eligible boolean;
    v_eligible boolean;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see 0003_hot_paths.sql
    SELECT x.queue INTO v_queue FROM {schema}.jobs x WHERE x.id = p_id;
    IF NOT FOUND THEN
        status := 'not_found'; RETURN NEXT; RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(v_queue, p_seed));
    SELECT * INTO j FROM {schema}.jobs x WHERE x.id = p_id FOR UPDATE;
    IF NOT FOUND OR j.state <> 'running' OR j.leases <> p_lease THEN
        status := 'not_found'; RETURN NEXT; RETURN;
    END IF;
    IF p_now >= j.deadline THEN
        status := 'expired'; lease_deadline := j.deadline; RETURN NEXT; RETURN;
    END IF;
    SELECT * INTO t FROM {schema}.tenants x WHERE x.id = j.tenant_id FOR UPDATE;
    SELECT q.vclock, coalesce(q.half_life, 60.0::double precision) INTO v_vclock, v_half_life
    FROM {schema}.queues q WHERE q.name = j.queue;

    -- F = F + (max(ended - started, MIN_CHARGE) - charged) / w, unchanged while w = 0
    v_finish := t.finish_tag;
    IF t.weight > 0 THEN
        v_finish := t.finish_tag
            + (GREATEST(p_now - j.started_at, 0.001::double precision) - j.charged) / t.weight;
    END IF;
    -- usage = max(decayed(usage, usage_at, now) + (F_new - F_old), 0)
    v_usage := GREATEST(
        {schema}.decayed(t.usage, t.usage_at, p_now, v_half_life) + (v_finish - t.finish_tag),
        0.0::double precision);
    -- S = max(F, V) if eligible
    v_was_eligible := t.ready > 0 AND (t.max_running IS NULL OR t.running < t.max_running)
        AND t.weight > 0 AND t.limited_until IS NULL;
    v_eligible := t.ready > 0 AND (t.max_running IS NULL OR t.running - 1 < t.max_running)
        AND t.weight > 0 AND t.limited_until IS NULL;

    UPDATE {schema}.jobs x SET state = 'succeeded', finished_at = p_now, deadline = NULL
    WHERE x.seq = j.seq;
    UPDATE {schema}.tenants x
    SET finish_tag = v_finish,
        start_tag = CASE WHEN v_eligible THEN GREATEST(v_finish, v_vclock) END,
        usage = v_usage,
        usage_at = GREATEST(t.usage_at, p_now),
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
