-- fairq PostgreSQL schema, version 5: a worker's finished jobs acked in one round trip.
--
-- ack_many(ids, leases, now, …) runs ack() for each lease in order inside one statement (one
-- transaction), so a worker that finished a batch of jobs pays one round trip, not one each.

-- Acks of several leases in one statement: exactly ack() on each (id, lease) in order, in one
-- transaction; one status per pair ('ok', 'not_found' or 'expired'), and nothing changes for a
-- lease that is not 'ok'. Locks are taken first, in the order of queries.sql (the queues'
-- shared locks by key, the jobs by seq, their tenants by id), so two batches never wait on each
-- other in a cycle; ack() then takes them again, which holds them already.
CREATE FUNCTION {schema}.ack_many(
    p_ids text[], p_leases integer[], p_now double precision, p_seed bigint,
    p_channel_salt text
) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    v_statuses text[] := ARRAY[]::text[];
    v_status text;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- see 0003_hot_paths.sql
    PERFORM pg_advisory_xact_lock_shared(s.k)
    FROM (SELECT DISTINCT hashtextextended(x.queue, p_seed) AS k
          FROM {schema}.jobs x WHERE x.id = ANY(p_ids)) s
    ORDER BY s.k;
    PERFORM 1 FROM {schema}.jobs x WHERE x.id = ANY(p_ids) ORDER BY x.seq FOR UPDATE;
    PERFORM 1 FROM {schema}.tenants t
    WHERE t.id IN (SELECT x.tenant_id FROM {schema}.jobs x
                   WHERE x.id = ANY(p_ids) AND x.state = 'running')
    ORDER BY t.id FOR UPDATE;
    FOR i IN 1 .. coalesce(array_length(p_ids, 1), 0) LOOP
        SELECT a.status INTO v_status
        FROM {schema}.ack(p_ids[i], p_leases[i], p_now, p_seed, p_channel_salt) a;
        v_statuses := v_statuses || v_status;
    END LOOP;
    RETURN v_statuses;
END
$$;
