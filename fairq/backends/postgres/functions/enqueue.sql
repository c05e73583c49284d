-- Enqueue: one statement for every caller (queries.sql: enqueue; enqueue.py builds its
-- arguments and reads its reply). A job goes one of two ways:
-- * stored: its tenant row is free. The call takes it (FOR UPDATE SKIP LOCKED: an enqueue
--   never waits for a tenant), first takes in that tenant's jobs still in the inbox (they
--   came before), then stores the job and counts it in (add_jobs).
-- * into the inbox: another transaction holds the tenant (a dispatch picking from it, an ack
--   of one of its jobs), or the enqueue runs in the caller's transaction (p_inbox:
--   transactional.py, which must take no fairq lock). Whoever holds the tenant next takes the
--   row in: an enqueue of that tenant, a dispatch of its queue (dispatch.sql), maintenance.
-- So an enqueue waits for no dispatch and no ack; it takes its queues' locks shared, waiting
-- only for maintenance, set_queue and the dispatch of a queue with a cap on its leased jobs,
-- which hold them exclusive.
--
-- Ids: an id already stored (in jobs, succeeded_jobs or the inbox) is refused with
-- unique_violation, and nothing of the batch is stored. The look-ups run after the inserts, in
-- statements of their own, so they see what a concurrent ack or take-in committed while an
-- insert waited for it (queries.sql: succeeded_ids). The one gap: two enqueues of one id at
-- the same moment, one stored and one into the inbox; the take-in drops the second with a
-- warning (it cannot refuse a call that has returned).
--
-- The unique-job check, and other checks at enqueue, belong in enqueue(), before the inserts.

-- Count jobs into tenants this transaction holds and store their rows, in the order given:
-- per tenant, Events' rules (fairq.policy.tenant.refresh): ready jobs make a tenant with
-- none returning; an eligible tenant that had no start tag starts at max(F, V), or with a
-- half-life at max(F, V + min(decayed usage, max_debt)) carried in F as well. p_seqs NULL: new
-- jobs (the next seqs, in order; an id in jobs raises unique_violation), enqueued at p_now;
-- else jobs taken in from the inbox, keeping their seqs and enqueue times, ready since
-- max(enqueued, run_at); one whose id was stored meanwhile is dropped. Returns the dropped
-- ids.
CREATE FUNCTION {schema}.add_jobs(
    p_tenant_ids bigint[], p_seqs bigint[], p_ids text[], p_names text[], p_queues text[],
    p_payloads text[], p_priorities integer[], p_run_ats double precision[],
    p_max_attempts integer[], p_lease_timeouts double precision[], p_costs double precision[],
    p_headers text[], p_enqueued_ats double precision[], p_now double precision
) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    v_tenants bigint[];           -- the stored jobs' tenants and run-ats
    v_run_ats double precision[];
    v_inserted bigint[];
    v_gone bigint[];
    v_dropped text[] := ARRAY[]::text[];
BEGIN
    IF coalesce(cardinality(p_ids), 0) = 0 THEN
        RETURN v_dropped;
    END IF;
    IF p_seqs IS NULL THEN
        INSERT INTO {schema}.jobs (
            seq, id, tenant_id, queue, name, state, payload, priority, max_attempts,
            lease_timeout, cost, enqueued_at, run_at, ready_at, headers)
        SELECT nextval('{schema}.jobs_seq_seq'), u.id, u.tenant_id, u.queue, u.name,
               CASE WHEN u.run_at <= p_now THEN 'ready' ELSE 'scheduled' END, u.payload,
               u.priority, u.max_attempts, u.lease_timeout, u.cost, p_now, u.run_at,
               CASE WHEN u.run_at <= p_now THEN p_now END, u.headers
        FROM unnest(p_ids, p_tenant_ids, p_queues, p_names, p_payloads, p_priorities,
                    p_max_attempts, p_lease_timeouts, p_costs, p_run_ats, p_headers)
                 WITH ORDINALITY AS u(id, tenant_id, queue, name, payload, priority,
                                      max_attempts, lease_timeout, cost, run_at, headers, ord)
        ORDER BY u.ord;  -- nextval is taken after the sort: seqs in the order given
        v_tenants := p_tenant_ids;
        v_run_ats := p_run_ats;
    ELSE
        WITH inserted AS (
            INSERT INTO {schema}.jobs (
                seq, id, tenant_id, queue, name, state, payload, priority, max_attempts,
                lease_timeout, cost, enqueued_at, run_at, ready_at, headers)
            SELECT u.seq, u.id, u.tenant_id, u.queue, u.name,
                   CASE WHEN u.run_at <= p_now THEN 'ready' ELSE 'scheduled' END, u.payload,
                   u.priority, u.max_attempts, u.lease_timeout, u.cost, u.enqueued_at,
                   u.run_at, CASE WHEN u.run_at <= p_now THEN GREATEST(u.enqueued_at, u.run_at)
                   END, u.headers
            FROM unnest(p_seqs, p_ids, p_tenant_ids, p_queues, p_names, p_payloads,
                        p_priorities, p_max_attempts, p_lease_timeouts, p_costs, p_run_ats,
                        p_headers, p_enqueued_ats)
                     AS u(seq, id, tenant_id, queue, name, payload, priority, max_attempts,
                          lease_timeout, cost, run_at, headers, enqueued_at)
            ORDER BY u.seq
            ON CONFLICT (id) DO NOTHING
            RETURNING seq)
        SELECT coalesce(array_agg(seq), ARRAY[]::bigint[]) INTO v_inserted FROM inserted;
        -- ids a succeeded job holds: no index spans both tables; a new statement sees the
        -- ack an insert waited for (queries.sql: succeeded_ids)
        WITH gone AS (
            DELETE FROM {schema}.jobs j USING {schema}.succeeded_jobs s
            WHERE j.seq = ANY(v_inserted) AND s.id = j.id
            RETURNING j.seq)
        SELECT coalesce(array_agg(seq), ARRAY[]::bigint[]) INTO v_gone FROM gone;
        SELECT array_agg(u.tenant_id ORDER BY u.seq), array_agg(u.run_at ORDER BY u.seq)
        INTO v_tenants, v_run_ats
        FROM unnest(p_seqs, p_tenant_ids, p_run_ats) AS u(seq, tenant_id, run_at)
        WHERE u.seq = ANY(v_inserted) AND u.seq <> ALL(v_gone);
        SELECT coalesce(array_agg(u.id ORDER BY u.seq), ARRAY[]::text[]) INTO v_dropped
        FROM unnest(p_seqs, p_ids) AS u(seq, id)
        WHERE u.seq <> ALL(v_inserted) OR u.seq = ANY(v_gone);
        IF v_tenants IS NULL THEN
            RETURN v_dropped;
        END IF;
    END IF;
    UPDATE {schema}.tenants t
    SET ready = t.ready + a.ready, scheduled = t.scheduled + a.scheduled,
        start_tag = CASE
            WHEN NOT (t.ready + a.ready > 0
                      AND (t.max_running IS NULL OR t.running < t.max_running)
                      AND t.weight > 0 AND t.limited_until IS NULL) THEN NULL
            WHEN t.start_tag IS NOT NULL THEN t.start_tag
            WHEN q.half_life IS NOT NULL THEN GREATEST(t.finish_tag, q.vclock + LEAST(
                {schema}.decayed(t.usage, t.usage_at, p_now, q.half_life), q.max_debt))
            ELSE GREATEST(t.finish_tag, q.vclock) END,
        finish_tag = CASE
            WHEN t.ready + a.ready > 0
                 AND (t.max_running IS NULL OR t.running < t.max_running)
                 AND t.weight > 0 AND t.limited_until IS NULL
                 AND t.start_tag IS NULL AND q.half_life IS NOT NULL
            THEN GREATEST(t.finish_tag, q.vclock + LEAST(
                {schema}.decayed(t.usage, t.usage_at, p_now, q.half_life), q.max_debt))
            ELSE t.finish_tag END,
        head_seq = (SELECT j.seq FROM {schema}.jobs j
                    WHERE j.tenant_id = t.id AND j.state = 'ready'
                    ORDER BY j.priority DESC, j.seq
                    LIMIT 1)
    FROM (SELECT s.tenant_id, count(*) FILTER (WHERE s.run_at <= p_now) AS ready,
                 count(*) FILTER (WHERE s.run_at > p_now) AS scheduled
          FROM unnest(v_tenants, v_run_ats) AS s(tenant_id, run_at)
          GROUP BY s.tenant_id) a, {schema}.queues q
    WHERE t.id = a.tenant_id AND q.name = t.queue;
    RETURN v_dropped;
END
$$;

-- Take inbox rows in. p_tenant_ids given: every row of those tenants (the caller holds them).
-- NULL: the rows of p_queue's tenants among its first p_limit rows that this transaction can
-- take (created if new, in key order; locked unless another transaction holds them, which
-- then takes them in itself, or the next one does). The rows come in oldest first. A row whose
-- id was stored meanwhile is dropped, with a warning. Returns how many came in.
CREATE FUNCTION {schema}.take_in(
    p_queue text, p_tenant_ids bigint[], p_now double precision, p_limit integer
) RETURNS integer LANGUAGE plpgsql
SET enable_seqscan = off AS $$  -- also when maintenance calls it (see dequeue.sql)
DECLARE
    v_held bigint[] := p_tenant_ids;
    v_seqs bigint[];
    v_ids text[];
    v_tenants bigint[];
    v_queues text[];
    v_names text[];
    v_payloads text[];
    v_priorities integer[];
    v_run_ats double precision[];
    v_max_attempts integer[];
    v_lease_timeouts double precision[];
    v_costs double precision[];
    v_headers text[];
    v_enqueued_ats double precision[];
    v_dropped text[];
BEGIN
    IF v_held IS NULL THEN
        INSERT INTO {schema}.queues (name) VALUES (p_queue) ON CONFLICT (name) DO NOTHING;
        INSERT INTO {schema}.tenants (
            queue, tenant, tenant_key, weight, max_running, rate_count, rate_period,
            rate_burst)
        SELECT q.name, p.tenant, p.tenant_key, q.weight, q.max_running, q.rate_count,
               q.rate_period, q.rate_burst
        FROM (SELECT DISTINCT f.tenant, f.tenant_key
              FROM (SELECT i.tenant, i.tenant_key FROM {schema}.inbox i
                    WHERE i.queue = p_queue ORDER BY i.seq LIMIT p_limit) f) p
        JOIN {schema}.queues q ON q.name = p_queue
        ORDER BY p.tenant_key
        ON CONFLICT (queue, tenant_key) DO NOTHING;
        v_held := ARRAY(
            SELECT t.id FROM {schema}.tenants t
            JOIN (SELECT DISTINCT f.tenant, f.tenant_key
                  FROM (SELECT i.tenant, i.tenant_key FROM {schema}.inbox i
                        WHERE i.queue = p_queue ORDER BY i.seq LIMIT p_limit) f) p
              ON t.queue = p_queue AND t.tenant_key = p.tenant_key AND t.tenant = p.tenant
            ORDER BY t.id
            FOR UPDATE OF t SKIP LOCKED);
    END IF;
    IF cardinality(v_held) = 0 THEN
        RETURN 0;
    END IF;
    WITH taken AS (
        DELETE FROM {schema}.inbox i
        USING {schema}.tenants t
        WHERE t.id = ANY(v_held) AND i.queue = t.queue AND i.tenant_key = t.tenant_key
          AND i.tenant = t.tenant
        RETURNING i.seq, i.id, t.id AS tenant_id, i.queue, i.name, i.payload, i.priority,
                  i.run_at, i.max_attempts, i.lease_timeout, i.cost, i.headers, i.enqueued_at)
    SELECT array_agg(seq ORDER BY seq), array_agg(id ORDER BY seq),
           array_agg(tenant_id ORDER BY seq), array_agg(queue ORDER BY seq),
           array_agg(name ORDER BY seq), array_agg(payload ORDER BY seq),
           array_agg(priority ORDER BY seq), array_agg(run_at ORDER BY seq),
           array_agg(max_attempts ORDER BY seq), array_agg(lease_timeout ORDER BY seq),
           array_agg(cost ORDER BY seq), array_agg(headers ORDER BY seq),
           array_agg(enqueued_at ORDER BY seq)
    INTO v_seqs, v_ids, v_tenants, v_queues, v_names, v_payloads, v_priorities, v_run_ats,
         v_max_attempts, v_lease_timeouts, v_costs, v_headers, v_enqueued_ats
    FROM taken;
    IF v_seqs IS NULL THEN
        RETURN 0;
    END IF;
    v_dropped := {schema}.add_jobs(
        v_tenants, v_seqs, v_ids, v_names, v_queues, v_payloads, v_priorities, v_run_ats,
        v_max_attempts, v_lease_timeouts, v_costs, v_headers, v_enqueued_ats, p_now);
    IF cardinality(v_dropped) > 0 THEN
        RAISE WARNING 'fairq: dropped jobs % from the inbox: a job with the same id is '
            'already stored (queued, running, dead or succeeded)', v_dropped;
    END IF;
    RETURN cardinality(v_seqs) - cardinality(v_dropped);
END
$$;

-- Every enqueue (see the top). Arguments: one array per field of the jobs, in order (p_keys:
-- sha256 of each tenant), the caller's now, the schema's seed (queue lock keys) and channel
-- salt, and p_inbox for an enqueue in the caller's transaction. Returns each job's queue.
CREATE FUNCTION {schema}.enqueue(
    p_ids text[], p_names text[], p_queues text[], p_tenants text[], p_keys bytea[],
    p_payloads text[], p_priorities integer[], p_run_ats double precision[],
    p_max_attempts integer[], p_lease_timeouts double precision[], p_costs double precision[],
    p_headers text[], p_now double precision, p_seed bigint, p_salt text, p_inbox boolean
) RETURNS text[] LANGUAGE plpgsql SET enable_seqscan = off AS $$  -- see dequeue.sql
DECLARE
    v_held bigint[] := ARRAY[]::bigint[];  -- the tenant rows this call holds
    v_tenants bigint[];                    -- per job: its tenant row if held, else NULL
    v_direct integer[] := ARRAY[]::integer[];  -- positions stored, and put in the inbox
    v_boxed integer[];
    v_taken integer;
    v_stored text[];
    v_queue text;
BEGIN
    IF NOT p_inbox THEN
        PERFORM pg_advisory_xact_lock_shared(s.k)
        FROM (SELECT DISTINCT hashtextextended(n, p_seed) AS k FROM unnest(p_queues) AS n) s
        ORDER BY s.k;
        p_now := {schema}.event_time(p_now);  -- the locks are held (clock.sql)
        INSERT INTO {schema}.queues (name)
        SELECT DISTINCT n FROM unnest(p_queues) AS n ORDER BY 1
        ON CONFLICT (name) DO NOTHING;
        -- new tenants start with their queue's defaults; created in key order, as take_in
        INSERT INTO {schema}.tenants (
            queue, tenant, tenant_key, weight, max_running, rate_count, rate_period,
            rate_burst)
        SELECT q.name, n.tenant, n.tenant_key, q.weight, q.max_running, q.rate_count,
               q.rate_period, q.rate_burst
        FROM (SELECT DISTINCT u.queue, u.tenant, u.tenant_key
              FROM unnest(p_queues, p_tenants, p_keys) AS u(queue, tenant, tenant_key)) n
        JOIN {schema}.queues q ON q.name = n.queue
        ORDER BY n.queue, n.tenant_key
        ON CONFLICT (queue, tenant_key) DO NOTHING;
        -- the free ones (a row a prune deleted meanwhile is not found: its jobs go to the
        -- inbox, and the take-in creates it again)
        v_held := ARRAY(
            SELECT t.id FROM {schema}.tenants t
            JOIN (SELECT DISTINCT u.queue, u.tenant, u.tenant_key
                  FROM unnest(p_queues, p_tenants, p_keys) AS u(queue, tenant, tenant_key)) n
              ON t.queue = n.queue AND t.tenant_key = n.tenant_key AND t.tenant = n.tenant
            ORDER BY t.id
            FOR UPDATE OF t SKIP LOCKED);
        IF cardinality(v_held) > 0 THEN
            v_tenants := ARRAY(
                SELECT t.id
                FROM unnest(p_queues, p_tenants, p_keys) WITH ORDINALITY
                         AS u(queue, tenant, tenant_key, ord)
                LEFT JOIN {schema}.tenants t
                  ON t.id = ANY(v_held) AND t.queue = u.queue AND t.tenant_key = u.tenant_key
                 AND t.tenant = u.tenant
                ORDER BY u.ord);
            SELECT coalesce(array_agg(o.ord::integer ORDER BY o.ord), ARRAY[]::integer[])
            INTO v_direct
            FROM unnest(v_tenants) WITH ORDINALITY AS o(tenant_id, ord)
            WHERE o.tenant_id IS NOT NULL;
            -- what waited in the inbox for these tenants came first
            v_taken := {schema}.take_in(NULL, v_held, p_now, NULL);
            PERFORM {schema}.add_jobs(
                ARRAY(SELECT v_tenants[i] FROM unnest(v_direct) AS i),
                NULL,
                ARRAY(SELECT p_ids[i] FROM unnest(v_direct) AS i),
                ARRAY(SELECT p_names[i] FROM unnest(v_direct) AS i),
                ARRAY(SELECT p_queues[i] FROM unnest(v_direct) AS i),
                ARRAY(SELECT p_payloads[i] FROM unnest(v_direct) AS i),
                ARRAY(SELECT p_priorities[i] FROM unnest(v_direct) AS i),
                ARRAY(SELECT p_run_ats[i] FROM unnest(v_direct) AS i),
                ARRAY(SELECT p_max_attempts[i] FROM unnest(v_direct) AS i),
                ARRAY(SELECT p_lease_timeouts[i] FROM unnest(v_direct) AS i),
                ARRAY(SELECT p_costs[i] FROM unnest(v_direct) AS i),
                ARRAY(SELECT p_headers[i] FROM unnest(v_direct) AS i),
                NULL, p_now);
        END IF;
    END IF;
    v_boxed := ARRAY(
        SELECT i FROM generate_subscripts(p_ids, 1) AS i WHERE i <> ALL(v_direct) ORDER BY i);
    IF cardinality(v_boxed) > 0 THEN
        INSERT INTO {schema}.inbox (
            id, queue, tenant, tenant_key, name, payload, priority, max_attempts,
            lease_timeout, cost, enqueued_at, run_at, headers)
        SELECT p_ids[i], p_queues[i], p_tenants[i], p_keys[i], p_names[i], p_payloads[i],
               p_priorities[i], p_max_attempts[i], p_lease_timeouts[i], p_costs[i], p_now,
               p_run_ats[i], p_headers[i]
        FROM unnest(v_boxed) AS i
        ORDER BY i;
    END IF;
    -- ids stored elsewhere (see the top)
    SELECT array_agg(format('%s (%s)', d.id, d.place) ORDER BY d.id) INTO v_stored FROM (
        SELECT s.id, 'succeeded' AS place FROM {schema}.succeeded_jobs s
        WHERE s.id = ANY(ARRAY(SELECT p_ids[i] FROM unnest(v_direct) AS i))
        UNION
        SELECT x.id, 'waiting to be taken in' FROM {schema}.inbox x
        WHERE x.id = ANY(ARRAY(SELECT p_ids[i] FROM unnest(v_direct) AS i))
        UNION
        SELECT j.id, 'queued, running or dead' FROM {schema}.jobs j
        WHERE j.id = ANY(ARRAY(SELECT p_ids[i] FROM unnest(v_boxed) AS i))
        UNION
        SELECT s.id, 'succeeded' FROM {schema}.succeeded_jobs s
        WHERE s.id = ANY(ARRAY(SELECT p_ids[i] FROM unnest(v_boxed) AS i))) d;
    IF v_stored IS NOT NULL THEN
        RAISE unique_violation USING
            MESSAGE = 'fairq: a job id is already stored',
            DETAIL = array_to_string(v_stored, ', ');
    END IF;
    -- wake the queues' workers when this commits: a ready job, or one to take in
    FOR v_queue IN
        SELECT DISTINCT p_queues[i]
        FROM generate_subscripts(p_ids, 1) AS i
        WHERE i <> ALL(v_direct) OR p_run_ats[i] <= p_now
        ORDER BY 1
    LOOP
        PERFORM pg_notify('fairq_' || substr(md5(p_salt || v_queue), 1, 24), '');
    END LOOP;
    RETURN p_queues;
END
$$;
