-- A tenant's tags and rate after a pick or a run ended (fairq/policy/fairness.py, history.py,
-- rate.py), each rule once for the functions that apply it (dispatch.sql, acks.sql). SQL
-- functions of one expression each, so the planner inlines them into the plpgsql expressions
-- and statements that call them: a step named here costs no call.

-- Whether a tenant may be picked from (fairq.policy.tenant.refresh): ready jobs, a free slot
-- under its cap, a weight, and no rate limit waiting.
CREATE FUNCTION {schema}.eligible(
    p_ready bigint, p_running bigint, p_max_running integer, p_weight double precision,
    p_limited_until double precision
) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT p_ready > 0 AND (p_max_running IS NULL OR p_running < p_max_running)
           AND p_weight > 0 AND p_limited_until IS NULL
$$;

-- usage = max(decayed(usage, usage_at, now) + (F_new - F_old), 0) (history.add_usage).
CREATE FUNCTION {schema}.usage_after(
    p_usage double precision, p_usage_at double precision, p_now double precision,
    p_half_life double precision, p_added double precision
) RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT GREATEST({schema}.decayed(p_usage, p_usage_at, p_now, p_half_life) + p_added,
                    0.0::double precision)
$$;

-- F after a run: F + (max(ended - started, MIN_CHARGE) - charged) / w, unchanged while w = 0
-- (fairness.finish_after_run).
CREATE FUNCTION {schema}.finish_after_run(
    p_finish double precision, p_weight double precision, p_started double precision,
    p_charged double precision, p_ended double precision
) RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_weight > 0
        THEN p_finish + (GREATEST(p_ended - p_started, 0.001::double precision) - p_charged)
             / p_weight
        ELSE p_finish END
$$;

-- GCRA after a start (rate.after_start): tat = max(tat, now) + interval (now + interval the
-- first time), interval = period / count; unchanged without a rate limit (count NULL).
CREATE FUNCTION {schema}.gcra_tat(
    p_tat double precision, p_now double precision, p_count integer,
    p_period double precision
) RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_count IS NULL THEN p_tat
                WHEN p_tat IS NULL THEN p_now + p_period / p_count
                ELSE GREATEST(p_tat, p_now) + p_period / p_count END
$$;

-- And the limit it leaves (rate.limited_until): tat - interval * (burst - 1) when that is
-- after now, else none.
CREATE FUNCTION {schema}.gcra_limited(
    p_tat double precision, p_now double precision, p_count integer,
    p_period double precision, p_burst integer
) RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_count IS NOT NULL
                     AND p_tat - p_period / p_count * (p_burst - 1) > p_now
                THEN p_tat - p_period / p_count * (p_burst - 1) END
$$;
