-- Per-tenant figures (fairq/figures.py, the rules in fairq/policy/histogram.py).
--
-- fig_bucket is histogram.bucket_of: how many of the bucket bounds 0.001 * 2^k (k = 0 .. 27,
-- histogram.BOUNDS: exact doubles, the same in every store) are below x
-- (tests/conformance/test_figures.py checks every bound). fig_slot is histogram.slot_of
-- (slots of histogram.SLOT = 60 s).
CREATE FUNCTION {schema}.fig_bucket(x double precision) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT count(*)::integer FROM generate_series(0, 27) AS k
    WHERE 0.001::double precision * power(2::double precision, k) < x
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
