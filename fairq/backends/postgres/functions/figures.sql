-- Per-tenant figures (fairq/figures.py, the rules in fairq/policy/histogram.py).
--
-- fig_bucket is histogram.bucket_of: how many of the bucket bounds 0.001 * 2^k (k = 0 .. 27,
-- histogram.BOUNDS: exact doubles, the same in every store) are below x
-- (tests/conformance/test_figures.py checks every bound). fig_slot is histogram.slot_of
-- (slots of histogram.SLOT = 60 s).

-- One expression, so the planner inlines it (a function with a FROM or an aggregate runs as a
-- call of its own per row). width_bucket counts the thresholds at or below its operand, so
-- over the negated bounds, in ascending order, it counts the bounds at or above x: the bounds
-- below x are the rest. The literals are the bounds' shortest decimal forms, which read back
-- to the very doubles (histogram.BOUNDS; the conformance suite checks each one).
CREATE FUNCTION {schema}.fig_bucket(x double precision) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 28 - width_bucket(-x, ARRAY[
        -134217.728, -67108.864, -33554.432, -16777.216, -8388.608, -4194.304, -2097.152,
        -1048.576, -524.288, -262.144, -131.072, -65.536, -32.768, -16.384, -8.192, -4.096,
        -2.048, -1.024, -0.512, -0.256, -0.128, -0.064, -0.032, -0.016, -0.008, -0.004, -0.002,
        -0.001
    ]::double precision[])
$$;

CREATE FUNCTION {schema}.fig_slot(p_now double precision) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT floor(p_now / 60.0::double precision)::bigint
$$;

-- Add counts to the slot of p_now: one per (tenant, kind, bucket) given, repeated ones summed,
-- written in key order (one order for every writer, so concurrent acks cannot deadlock on them).
CREATE FUNCTION {schema}.fig_add(
    p_now double precision, p_tenants bigint[], p_kinds text[], p_buckets integer[]
) RETURNS void LANGUAGE sql AS $$
    INSERT INTO {schema}.figures AS f (slot, tenant_id, kind, bucket, count)
    SELECT {schema}.fig_slot(p_now), a.tenant_id, a.kind, a.bucket, count(*)
    FROM unnest(p_tenants, p_kinds, p_buckets) AS a(tenant_id, kind, bucket)
    GROUP BY a.tenant_id, a.kind, a.bucket
    ORDER BY a.tenant_id, a.kind, a.bucket
    ON CONFLICT (slot, tenant_id, kind, bucket) DO UPDATE SET count = f.count + excluded.count
$$;

-- The counts a tenant row holds (tenants.fig_*: the waits its dispatches and the run times
-- of its acks in its slot fig_slot, one call's worth written with the row it changes anyway)
-- added to figures: p_rows are rows of tenants the caller holds, as they were before their
-- slot changed, each once; written in key order as fig_add. Called once per tenant and slot
-- (dispatch.sql: write_round; acks.sql: ack_held).
CREATE FUNCTION {schema}.fig_flush(p_rows {schema}.tenants[]) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO {schema}.figures AS f (slot, tenant_id, kind, bucket, count)
    SELECT r.fig_slot, r.id, CASE WHEN u.k >= 32 THEN 'r' ELSE 'w' END, u.k % 32, sum(u.c)
    FROM unnest(p_rows) AS r
    CROSS JOIN LATERAL unnest(r.fig_keys, r.fig_counts) AS u(k, c)
    GROUP BY 1, 2, 3, 4
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (slot, tenant_id, kind, bucket) DO UPDATE SET count = f.count + excluded.count
$$;

-- A tenant row's counts (tenants.fig_keys, fig_counts: keys of waits, 32 + bucket of runs)
-- after one more p_key: p_same, the row's slot is the current one, else they start afresh
-- (fig_flush has taken the old ones). Expressions the planner inlines: no call per job.
CREATE FUNCTION {schema}.fig_keys_after(p_keys integer[], p_same boolean, p_key integer)
RETURNS integer[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN NOT p_same THEN ARRAY[p_key] WHEN p_key = ANY(p_keys) THEN p_keys
                ELSE p_keys || p_key END
$$;

CREATE FUNCTION {schema}.fig_counts_after(
    p_keys integer[], p_counts integer[], p_same boolean, p_key integer
) RETURNS integer[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN NOT p_same THEN ARRAY[1]
                WHEN array_position(p_keys, p_key) IS NULL THEN p_counts || 1
                ELSE p_counts[:array_position(p_keys, p_key) - 1]
                     || p_counts[array_position(p_keys, p_key)] + 1
                     || p_counts[array_position(p_keys, p_key) + 1:] END
$$;
