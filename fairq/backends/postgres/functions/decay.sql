-- The decay of a tenant's recent usage (fairq/policy/history.py: decayed), in SQL.

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
-- into the statements and expressions that call it; only a product near the smallest double goes to decayed_product.
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
