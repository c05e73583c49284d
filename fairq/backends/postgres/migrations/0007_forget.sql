-- fairq PostgreSQL schema, version 7: an idle tenant's row expires (issue 3).
--
-- kept counts the succeeded jobs still stored for a tenant: ack_many adds one per job it
-- acks (ack is ack_many of one lease), maintenance's prune takes off what it deletes. When
-- pruning deletes a tenant's last stored job and it has no settings of its own and no rate
-- state in the future (fairq.policy.tenant.forgettable), its row is deleted; a returning
-- tenant starts like a new one. Existing rows count their succeeded jobs here.

ALTER TABLE {schema}.tenants ADD COLUMN kept bigint NOT NULL DEFAULT 0 CHECK (kept >= 0);

UPDATE {schema}.tenants t SET kept = s.n
FROM (SELECT j.tenant_id, count(*) AS n FROM {schema}.jobs j
      WHERE j.state = 'succeeded' GROUP BY j.tenant_id) s
WHERE t.id = s.tenant_id;

-- Acks of several leases in one statement, exactly as acking each (id, lease) in the order
-- given, in one transaction: one status per pair, 'ok', 'not_found' (unknown, finished, or
-- another lease) or 'expired'; nothing changes for a lease that is not 'ok'. Locks in the
-- order of queries.sql: the queues' shared locks by key, the jobs by seq, their tenants by id.
-- NOTIFYs a queue when a freed slot makes a capped tenant with ready jobs eligible again.
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
    a record;
    j record;
    t record;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see 0003_hot_paths.sql
    PERFORM pg_advisory_xact_lock_shared(s.k)
    FROM (SELECT DISTINCT hashtextextended(x.queue, p_seed) AS k
          FROM {schema}.jobs x WHERE x.id = ANY(p_ids)) s
    ORDER BY s.k;
    -- the jobs, in seq order: running -> succeeded if the lease is held and not over
    FOR a IN
        SELECT x.seq, p.lease, p.ord
        FROM unnest(p_ids, p_leases) WITH ORDINALITY AS p(id, lease, ord)
        CROSS JOIN LATERAL (  -- one probe of the id index each, whatever the table's size
            SELECT y.seq FROM {schema}.jobs y WHERE y.id = p.id LIMIT 1) x
        ORDER BY x.seq, p.ord
    LOOP
        UPDATE {schema}.jobs x SET state = 'succeeded', finished_at = p_now, deadline = NULL
        WHERE x.seq = a.seq AND x.state = 'running' AND x.leases = a.lease
          AND p_now < x.deadline
        RETURNING x.tenant_id, x.started_at, x.charged INTO j;
        IF FOUND THEN
            v_statuses[a.ord::integer] := 'ok';
            v_ords := v_ords || a.ord::integer;
            v_tenants := v_tenants || j.tenant_id;
            v_started := v_started || j.started_at;
            v_charged := v_charged || j.charged;
        ELSIF EXISTS (SELECT 1 FROM {schema}.jobs x WHERE x.seq = a.seq
                      AND x.state = 'running' AND x.leases = a.lease) THEN
            v_statuses[a.ord::integer] := 'expired';
        END IF;
    END LOOP;
    -- their tenants, in id order, each tenant's leases in the order given:
    -- F = finish_after_ack(…); usage = max(decayed(usage, usage_at, now) + (F_new - F_old), 0);
    -- S = max(F, V) if eligible
    FOR a IN
        SELECT * FROM unnest(v_ords, v_tenants, v_started, v_charged)
            AS d(ord, tenant_id, started_at, charged)
        ORDER BY d.tenant_id, d.ord
    LOOP
        -- every value is computed from x itself (not from an earlier read of the row), so
        -- when another ack of this tenant commits first, the UPDATE redoes it on the new row
        UPDATE {schema}.tenants x
        SET finish_tag = {schema}.finish_after_ack(
                x.finish_tag, x.weight, a.started_at, a.charged, p_now),
            start_tag = CASE
                WHEN x.ready > 0 AND (x.max_running IS NULL OR x.running - 1 < x.max_running)
                     AND x.weight > 0 AND x.limited_until IS NULL
                THEN GREATEST(
                    {schema}.finish_after_ack(
                        x.finish_tag, x.weight, a.started_at, a.charged, p_now),
                    (SELECT q.vclock FROM {schema}.queues q WHERE q.name = x.queue)) END,
            usage = GREATEST(
                {schema}.decayed(x.usage, x.usage_at, p_now,
                    (SELECT coalesce(q.half_life, 60.0::double precision)
                     FROM {schema}.queues q WHERE q.name = x.queue))
                + ({schema}.finish_after_ack(
                       x.finish_tag, x.weight, a.started_at, a.charged, p_now)
                   - x.finish_tag),
                0.0::double precision),
            usage_at = GREATEST(x.usage_at, p_now),
            running = x.running - 1,
            succeeded = x.succeeded + 1,
            kept = x.kept + 1
        WHERE x.id = a.tenant_id AND x.running > 0
        RETURNING x.queue, x.ready, x.running, x.max_running, x.weight, x.limited_until INTO t;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'fairq: tenant row % would go below 0 running', a.tenant_id;
        END IF;
        -- eligible now (running already lowered) but not before: wake the queue's workers
        IF t.ready > 0 AND t.weight > 0 AND t.limited_until IS NULL
           AND t.max_running IS NOT NULL AND t.running < t.max_running
           AND NOT t.running + 1 < t.max_running THEN
            PERFORM pg_notify('fairq_' || substr(md5(p_channel_salt || t.queue), 1, 24), '');
        END IF;
    END LOOP;
    RETURN v_statuses;
END
$$;
