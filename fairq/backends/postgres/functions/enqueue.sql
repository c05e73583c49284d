-- Enqueue: one statement for every caller (queries/enqueue.sql: enqueue; producing.py builds its
-- arguments and reads its reply). A job goes one of two ways:
-- * stored: its tenant row is free. The call takes it (FOR UPDATE SKIP LOCKED: an enqueue
--   never waits for a tenant), first takes in that tenant's jobs still in the inbox (they
--   came before), then stores the job and counts it in (one statement for the batch).
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
-- insert waited for it (enqueue(): the id check). The one gap: two enqueues of one id at
-- the same moment, one stored and one into the inbox; the take-in drops the second with a
-- warning (it cannot refuse a call that has returned).
--
-- The unique-job check, and other checks at enqueue, belong in enqueue(), before the inserts.

-- The start tag of a tenant that has p_ready ready jobs once the new ones are counted in
-- (fairq.policy.tenant.refresh): none when it is not eligible then; kept when it had one; else
-- max(F, V), or with a half-life (a tenant with no start tag that becomes eligible had no
-- ready job: it is returning) max(F, V + min(decayed usage, max_debt)), which then becomes its
-- F as well (entered_finish). SQL functions of one expression, so the planner inlines them;
-- the tenant's columns one by one (a whole row as argument was built for every use of it:
-- a quarter of an enqueue's cost).
CREATE FUNCTION {schema}.entered_start(
    p_ready bigint, p_max_running integer, p_running bigint, p_weight double precision,
    p_limited_until double precision, p_start_tag double precision,
    p_finish_tag double precision, p_usage double precision, p_usage_at double precision,
    p_vclock double precision, p_half_life double precision, p_max_debt double precision,
    p_now double precision
) RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN NOT (p_ready > 0 AND (p_max_running IS NULL OR p_running < p_max_running)
                  AND p_weight > 0 AND p_limited_until IS NULL) THEN NULL
        WHEN p_start_tag IS NOT NULL THEN p_start_tag
        WHEN p_half_life IS NOT NULL THEN GREATEST(p_finish_tag, p_vclock + LEAST(
            {schema}.decayed(p_usage, p_usage_at, p_now, p_half_life), p_max_debt))
        ELSE GREATEST(p_finish_tag, p_vclock) END
$$;

CREATE FUNCTION {schema}.entered_finish(
    p_ready bigint, p_max_running integer, p_running bigint, p_weight double precision,
    p_limited_until double precision, p_start_tag double precision,
    p_finish_tag double precision, p_usage double precision, p_usage_at double precision,
    p_vclock double precision, p_half_life double precision, p_max_debt double precision,
    p_now double precision
) RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_start_tag IS NULL AND p_half_life IS NOT NULL
        THEN coalesce({schema}.entered_start(
            p_ready, p_max_running, p_running, p_weight, p_limited_until, p_start_tag,
            p_finish_tag, p_usage, p_usage_at, p_vclock, p_half_life, p_max_debt, p_now),
            p_finish_tag)
        ELSE p_finish_tag END
$$;

-- Take inbox rows in. p_tenant_ids given: every row of those tenants (the caller holds them).
-- NULL: the rows of the tenants among the first p_limit rows of each of p_queues that this
-- transaction can take (inbox_tenants). The rows come in (move_inbox), then each tenant is
-- counted as enqueue() does (its head read again from jobs). Returns how many came in.
CREATE FUNCTION {schema}.take_in(
    p_queues text[], p_tenant_ids bigint[], p_now double precision, p_limit integer
) RETURNS integer LANGUAGE plpgsql  -- also when maintenance calls it: see enqueue()
SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_held bigint[] := coalesce(p_tenant_ids, {schema}.inbox_tenants(p_queues, p_limit));
    m record;  -- the rows moved (move_inbox)
BEGIN
    IF cardinality(v_held) = 0 THEN
        RETURN 0;
    END IF;
    m := {schema}.move_inbox(v_held, p_now);
    IF cardinality(m.inserted) = 0 AND cardinality(m.dropped) = 0 THEN
        RETURN 0;
    END IF;
    UPDATE {schema}.tenants t
    SET ready = t.ready + a.ready, scheduled = t.scheduled + a.scheduled,
        start_tag = {schema}.entered_start(
            t.ready + a.ready, t.max_running, t.running, t.weight, t.limited_until, t.start_tag,
            t.finish_tag, t.usage, t.usage_at, q.vclock, q.half_life, q.max_debt, p_now),
        finish_tag = {schema}.entered_finish(
            t.ready + a.ready, t.max_running, t.running, t.weight, t.limited_until, t.start_tag,
            t.finish_tag, t.usage, t.usage_at, q.vclock, q.half_life, q.max_debt, p_now),
        head_seq = (SELECT j.seq FROM {schema}.jobs j
                    WHERE j.tenant_id = t.id AND j.state = 'ready'
                    ORDER BY j.priority DESC, j.seq
                    LIMIT 1)
    FROM (SELECT j.tenant_id, count(*) FILTER (WHERE j.state = 'ready') AS ready,
                 count(*) FILTER (WHERE j.state = 'scheduled') AS scheduled
          FROM {schema}.jobs j
          WHERE j.seq = ANY(m.inserted)
          GROUP BY j.tenant_id) a
    JOIN {schema}.tenants o ON o.id = a.tenant_id
    JOIN {schema}.queues q ON q.name = o.queue
    WHERE t.id = a.tenant_id;
    IF cardinality(m.dropped) > 0 THEN
        RAISE WARNING 'fairq: dropped jobs % from the inbox: a job with the same id is '
            'already stored (queued, running, dead or succeeded)', m.dropped;
    END IF;
    RETURN cardinality(m.inserted);
END
$$;

-- The tenants of the first p_limit inbox rows of each of p_queues, held by this transaction
-- (made if new, all in one statement in key order, so two take-ins or enqueues making the same
-- tenants never wait on each other in a cycle; locked unless another transaction holds them,
-- which then takes them in itself, or the next one does): their ids, each once.
CREATE FUNCTION {schema}.inbox_tenants(p_queues text[], p_limit integer)
RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
    v_pending record;
BEGIN
    PERFORM {schema}.make_queues(p_queues);
    SELECT array_agg(f.queue) AS queues, array_agg(f.tenant) AS tenants,
           array_agg(f.tenant_key) AS keys
    INTO v_pending
    FROM unnest(p_queues) AS n(queue)
    CROSS JOIN LATERAL (
        SELECT i.queue, i.tenant, i.tenant_key FROM {schema}.inbox i
        WHERE i.queue = n.queue ORDER BY i.seq LIMIT p_limit) f;
    IF v_pending.queues IS NULL THEN
        RETURN ARRAY[]::bigint[];
    END IF;
    RETURN array_remove(ARRAY(SELECT DISTINCT unnest({schema}.hold_tenants(
        v_pending.queues, v_pending.tenants, v_pending.keys))), NULL);
END
$$;

-- Every inbox row of the tenants p_held, moved into jobs: oldest first, keeping their seqs and
-- enqueue times, ready since max(enqueued, run_at) if run_at <= p_now. A row whose id was
-- stored meanwhile is dropped: an id in jobs (the insert's conflict), or in succeeded_jobs (no
-- index spans both tables; a statement of its own, which sees the ack an insert waited for).
-- inserted: the seqs stored; dropped: the ids dropped.
CREATE FUNCTION {schema}.move_inbox(
    p_held bigint[], p_now double precision, OUT inserted bigint[], OUT dropped text[]
) LANGUAGE plpgsql AS $$
DECLARE
    v_gone bigint[];
BEGIN
    WITH taken AS (
        DELETE FROM {schema}.inbox i
        USING {schema}.tenants t
        WHERE t.id = ANY(p_held) AND i.queue = t.queue AND i.tenant_key = t.tenant_key
          AND i.tenant = t.tenant
        RETURNING i.seq, i.id, t.id AS tenant_id, i.queue, i.name, i.payload, i.priority,
                  i.run_at, i.max_attempts, i.lease_timeout, i.cost, i.headers, i.enqueued_at,
                  i.learn_cost
    ), stored AS (
        INSERT INTO {schema}.jobs (
            seq, id, tenant_id, queue, name, state, payload, priority, max_attempts,
            lease_timeout, cost, enqueued_at, run_at, ready_at, headers, learn_cost)
        SELECT u.seq, u.id, u.tenant_id, u.queue, u.name,
               CASE WHEN u.run_at <= p_now THEN 'ready' ELSE 'scheduled' END, u.payload,
               u.priority, u.max_attempts, u.lease_timeout, u.cost, u.enqueued_at, u.run_at,
               CASE WHEN u.run_at <= p_now THEN GREATEST(u.enqueued_at, u.run_at) END,
               u.headers, u.learn_cost
        FROM taken u
        ORDER BY u.seq
        ON CONFLICT (id) DO NOTHING
        RETURNING seq)
    SELECT coalesce((SELECT array_agg(seq) FROM stored), ARRAY[]::bigint[]),
           coalesce((SELECT array_agg(id ORDER BY seq) FROM taken
                     WHERE seq NOT IN (SELECT seq FROM stored)), ARRAY[]::text[])
    INTO inserted, dropped;
    IF cardinality(inserted) = 0 THEN
        RETURN;
    END IF;
    WITH gone AS (
        DELETE FROM {schema}.jobs j USING {schema}.succeeded_jobs s
        WHERE j.seq = ANY(inserted) AND s.id = j.id
        RETURNING j.seq, j.id)
    SELECT coalesce(array_agg(seq), ARRAY[]::bigint[]), dropped || coalesce(array_agg(id),
                                                                            ARRAY[]::text[])
    INTO v_gone, dropped FROM gone;
    inserted := ARRAY(SELECT n FROM unnest(inserted) AS n WHERE n <> ALL(v_gone));
END
$$;

-- The queues named that are not there yet, made (only those not seen: see hold_tenants).
CREATE FUNCTION {schema}.make_queues(p_queues text[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.queues (name)
    SELECT DISTINCT n FROM unnest(p_queues) AS n
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.queues q WHERE q.name = n)
    ORDER BY 1
    ON CONFLICT (name) DO NOTHING;
END
$$;

-- Each job's tenant row (p_queues[i], p_tenants[i], whose sha256 is p_keys[i]), locked by this
-- transaction, or NULL where another transaction holds it (never waited for). Rows not there
-- yet are made, in (queue, key) order, starting with their queue's defaults; the caller has
-- made the queues. Only rows this statement does not see are inserted: the unique check of an
-- insert waits for any transaction that is changing a row of the same key (ON CONFLICT DO
-- NOTHING included), which would make this wait for a dispatch or an ack after all (and wait
-- in a cycle with one). A new tenant being made by another transaction at the same moment is
-- waited for: all of them are made in one order.
CREATE FUNCTION {schema}.hold_tenants(p_queues text[], p_tenants text[], p_keys bytea[])
RETURNS bigint[] LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.tenants (
        queue, tenant, tenant_key, weight, max_running, rate_count, rate_period, rate_burst)
    SELECT q.name, n.tenant, n.tenant_key, q.weight, q.max_running, q.rate_count,
           q.rate_period, q.rate_burst
    FROM (SELECT DISTINCT u.queue, u.tenant, u.tenant_key
          FROM unnest(p_queues, p_tenants, p_keys) AS u(queue, tenant, tenant_key)) n
    JOIN {schema}.queues q ON q.name = n.queue
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.tenants e
                      WHERE e.queue = n.queue AND e.tenant_key = n.tenant_key)
    ORDER BY n.queue COLLATE "C", n.tenant_key
    ON CONFLICT (queue, tenant_key) DO NOTHING;
    RETURN {schema}.tenants_held(p_queues, p_tenants, p_keys);
END
$$;

-- Each job's tenant row, locked by this transaction (FOR UPDATE SKIP LOCKED: a row another
-- transaction holds is never waited for), or NULL: held by another, or not there.
CREATE FUNCTION {schema}.tenants_held(p_queues text[], p_tenants text[], p_keys bytea[])
RETURNS bigint[] LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT array_agg(h.id ORDER BY u.ord)
    FROM unnest(p_queues, p_tenants, p_keys) WITH ORDINALITY AS u(queue, tenant, tenant_key, ord)
    LEFT JOIN LATERAL (
        SELECT t.id FROM {schema}.tenants t
        WHERE t.queue = u.queue AND t.tenant_key = u.tenant_key AND t.tenant = u.tenant
        FOR UPDATE SKIP LOCKED) h ON true);
END
$$;

-- Every enqueue (see the top). p_jobs: the jobs, in order, as a JSON array of objects with the
-- inbox's columns (one text parameter for any batch: producing.py's arguments; learn_cost
-- true when left out, as an older fairq's enqueue leaves it), read once
-- into an array of inbox rows with their seqs drawn; the caller's now, the schema's seed
-- (queue lock keys) and channel salt, and p_inbox for an enqueue in the caller's transaction.
-- Returns each job's queue. In steps: the jobs read (in the array's order, no sort: a
-- function scan read by one aggregate, and so are their seqs), the queues' locks taken
-- (shared, in key order) and then the event's time (none into the inbox); their tenants held
-- (hold_for_enqueue); the jobs of the tenants held stored (store_held), the others put in the
-- inbox (box_jobs); the id check: here when every job was stored (its one statement), else
-- stored_elsewhere, which also lists them; the wake-ups of the queues' workers when this
-- commits (a ready job, or one to take in). When every tenant is free and there, six
-- statements of small plans (their start-up is most of an enqueue's cost) and two calls of
-- these steps, each called as an expression (a plpgsql PERFORM would run a query through the
-- executor for the call).
CREATE FUNCTION {schema}.enqueue(
    p_jobs json, p_now double precision, p_seed bigint, p_salt text, p_inbox boolean
) RETURNS text[] LANGUAGE plpgsql
-- see dequeue.sql for enable_seqscan. Generic plans: with custom ones each of its statements
-- was planned again on every call (1.6 ms a call, against 0.7 ms; benchmarks/postgres_enqueue.py)
SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_jobs {schema}.inbox[];  -- the jobs, in order, seqs drawn in that order
    v_ids text[];
    v_queues text[];
    v_run_ats double precision[];
    v_held bigint[];          -- per job: its tenant row if held here, else NULL
    h record;                 -- the tenants held (hold_for_enqueue)
    v_n integer;
    v_stored text[];          -- ids stored elsewhere
BEGIN
    SELECT a.jobs, a.ids, a.queues, a.run_ats, CASE WHEN p_inbox THEN p_now ELSE (
               SELECT {schema}.event_time(p_now)
               FROM (SELECT count(*) FROM (
                         SELECT pg_advisory_xact_lock_shared(s.k)
                         FROM (SELECT DISTINCT hashtextextended(j.queue, p_seed) AS k
                               FROM unnest(a.queues) AS j(queue)) s
                         ORDER BY s.k) l) locked) END
    INTO v_jobs, v_ids, v_queues, v_run_ats, p_now
    FROM (SELECT array_agg(ROW(nextval('{schema}.jobs_seq_seq'), j.id, j.queue, j.tenant,
                               j.name, j.payload, j.priority, j.max_attempts, j.lease_timeout,
                               j.cost, NULL, j.run_at, j.headers, j.tenant_key,
                               coalesce(j.learn_cost, true))::{schema}.inbox)
                     AS jobs,
                 array_agg(j.id) AS ids, array_agg(j.queue) AS queues,
                 array_agg(j.run_at) AS run_ats
          FROM json_populate_recordset(NULL::{schema}.inbox, p_jobs) AS j) a;
    IF p_inbox THEN
        v_held := array_fill(NULL::bigint, ARRAY[cardinality(v_ids)]);
    ELSE
        h := {schema}.hold_for_enqueue(v_jobs, v_queues);
        v_held := h.held;
        IF cardinality(array_remove(v_held, NULL)) > 0 THEN
            v_n := {schema}.store_held(v_jobs, v_held, v_queues, p_now, h.unstarted);
        END IF;
    END IF;
    IF array_position(v_held, NULL) IS NOT NULL THEN
        PERFORM {schema}.box_jobs(v_jobs, v_held, p_now);
    END IF;
    IF array_position(v_held, NULL) IS NOT NULL
       OR EXISTS (SELECT 1 FROM {schema}.succeeded_jobs s WHERE s.id = ANY(v_ids))
       OR EXISTS (SELECT 1 FROM {schema}.inbox x WHERE x.id = ANY(v_ids)) THEN
        v_stored := {schema}.stored_elsewhere(v_ids, v_held);
        IF v_stored IS NOT NULL THEN
            RAISE unique_violation USING MESSAGE = 'fairq: a job id is already stored',
                DETAIL = array_to_string(v_stored, ', ');
        END IF;
    END IF;
    PERFORM pg_notify('fairq_' || substr(md5(p_salt || w.queue), 1, 24), '')
    FROM (SELECT DISTINCT u.queue
          FROM unnest(v_queues, v_run_ats, v_held) AS u(queue, run_at, held)
          WHERE u.run_at <= p_now OR u.held IS NULL) w;
    RETURN v_queues;
END
$$;

-- Each job's tenant row, held by this call (FOR UPDATE SKIP LOCKED: a row another
-- transaction holds is never waited for), or NULL: held by another (held); unstarted: a
-- tenant held had no start tag, or is not known to have one. A tenant or queue not there yet,
-- or held by another: what is missing is made (a row a prune deleted meanwhile is made
-- again), and what is free taken (hold_tenants).
CREATE FUNCTION {schema}.hold_for_enqueue(
    p_jobs {schema}.inbox[], p_queues text[], OUT held bigint[], OUT unstarted boolean
) LANGUAGE plpgsql AS $$
BEGIN
    SELECT array_agg(h.id ORDER BY u.ordinality), bool_or(h.unstarted)
    INTO held, unstarted
    FROM unnest(p_jobs) WITH ORDINALITY AS u
    LEFT JOIN LATERAL (
        SELECT t.id, t.start_tag IS NULL AS unstarted FROM {schema}.tenants t
        WHERE t.queue = u.queue AND t.tenant_key = u.tenant_key AND t.tenant = u.tenant
        FOR UPDATE SKIP LOCKED) h ON true;
    IF array_position(held, NULL) IS NOT NULL THEN
        PERFORM {schema}.make_queues(p_queues);
        unstarted := true;  -- the rows made or taken here: not known
        held := {schema}.hold_tenants(p_queues, ARRAY(SELECT (unnest(p_jobs)).tenant),
                                      ARRAY(SELECT (unnest(p_jobs)).tenant_key));
    END IF;
END
$$;

-- The jobs whose tenants this call holds (p_held[i] not NULL): what waited in the inbox for
-- those tenants comes first (a statement of its own: it sees the rows committed until the
-- tenants were held); then the jobs stored (an id in jobs raises unique_violation), ready
-- (since p_now) or scheduled, and each tenant's counts and head counted in, in one
-- statement: its old head or its best new ready job, whichever comes first in (priority
-- DESC, seq) order. A tenant with a start tag was eligible and stays so, its tags unchanged;
-- the tags of one that had none (p_unstarted), which may be eligible now, follow
-- (entered_start; a statement of its own: the one before is most of an enqueue's cost, and
-- this one would add a third to it).
-- Returns how many tenants the jobs were counted into.
CREATE FUNCTION {schema}.store_held(
    p_jobs {schema}.inbox[], p_held bigint[], p_queues text[], p_now double precision,
    p_unstarted boolean
) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_counted integer;
BEGIN
    IF EXISTS (SELECT 1 FROM {schema}.inbox i WHERE i.queue = ANY(p_queues)) THEN
        PERFORM {schema}.take_in(
            p_queues, array_remove(ARRAY(SELECT DISTINCT unnest(p_held)), NULL), p_now, NULL);
    END IF;
    WITH stored AS (
        INSERT INTO {schema}.jobs (
            seq, id, tenant_id, queue, name, state, payload, priority, max_attempts,
            lease_timeout, cost, enqueued_at, run_at, ready_at, headers, learn_cost)
        SELECT u.seq, u.id, p_held[u.ordinality], u.queue, u.name,
               CASE WHEN u.run_at <= p_now THEN 'ready' ELSE 'scheduled' END,
               u.payload, u.priority, u.max_attempts, u.lease_timeout, u.cost, p_now,
               u.run_at, CASE WHEN u.run_at <= p_now THEN p_now END, u.headers,
               u.learn_cost
        FROM unnest(p_jobs) WITH ORDINALITY AS u
        WHERE p_held[u.ordinality] IS NOT NULL)
    UPDATE {schema}.tenants t
    SET ready = t.ready + a.ready, scheduled = t.scheduled + a.added - a.ready,
        head_seq = CASE
            WHEN a.head IS NULL OR (SELECT ARRAY[-h.priority::bigint, h.seq] <= a.head
                                    FROM {schema}.jobs h WHERE h.seq = t.head_seq)
            THEN t.head_seq ELSE a.head[2] END
    FROM (SELECT p_held[u.ordinality] AS tenant_id, count(*) AS added,
                 count(*) FILTER (WHERE u.run_at <= p_now) AS ready,
                 -- (-priority, seq) of the best new ready job
                 min(ARRAY[-u.priority::bigint, u.seq])
                     FILTER (WHERE u.run_at <= p_now) AS head
          FROM unnest(p_jobs) WITH ORDINALITY AS u
          WHERE p_held[u.ordinality] IS NOT NULL
          GROUP BY 1) a
    WHERE t.id = a.tenant_id;
    GET DIAGNOSTICS v_counted = ROW_COUNT;
    IF p_unstarted THEN
        UPDATE {schema}.tenants t
        SET start_tag = {schema}.entered_start(
                t.ready, t.max_running, t.running, t.weight, t.limited_until, t.start_tag,
                t.finish_tag, t.usage, t.usage_at, q.vclock, q.half_life, q.max_debt, p_now),
            finish_tag = {schema}.entered_finish(
                t.ready, t.max_running, t.running, t.weight, t.limited_until, t.start_tag,
                t.finish_tag, t.usage, t.usage_at, q.vclock, q.half_life, q.max_debt, p_now)
        FROM {schema}.queues q
        WHERE t.id = ANY(p_held) AND t.start_tag IS NULL AND q.name = t.queue;
    END IF;
    RETURN v_counted;
END
$$;

-- The jobs whose tenants another transaction holds (p_held[i] NULL), or all of an enqueue in
-- the caller's transaction, put in the inbox, enqueued at p_now: whoever holds the tenant next
-- takes them in (see the top).
CREATE FUNCTION {schema}.box_jobs(
    p_jobs {schema}.inbox[], p_held bigint[], p_now double precision
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.inbox (
        seq, id, queue, tenant, tenant_key, name, payload, priority, max_attempts,
        lease_timeout, cost, enqueued_at, run_at, headers, learn_cost)
    SELECT u.seq, u.id, u.queue, u.tenant, u.tenant_key, u.name, u.payload, u.priority,
           u.max_attempts, u.lease_timeout, u.cost, p_now, u.run_at, u.headers, u.learn_cost
    FROM unnest(p_jobs) WITH ORDINALITY AS u
    WHERE p_held[u.ordinality] IS NULL
    ORDER BY u.ordinality;
END
$$;

-- Ids stored elsewhere (see the top), each as "id (where)", or NULL when there is none: any
-- id in succeeded_jobs, a stored job's (p_held[i] not NULL) in the inbox, an inbox row's in
-- jobs (looked for first, then listed); enqueue() refuses them with unique_violation.
CREATE FUNCTION {schema}.stored_elsewhere(p_ids text[], p_held bigint[]) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    v_direct text[] := p_ids;  -- the ids stored in jobs, and put in the inbox
    v_boxed text[] := ARRAY[]::text[];
BEGIN
    IF array_position(p_held, NULL) IS NOT NULL THEN
        v_direct := ARRAY(SELECT u.id FROM unnest(p_ids, p_held) AS u(id, held)
                          WHERE u.held IS NOT NULL);
        v_boxed := ARRAY(SELECT u.id FROM unnest(p_ids, p_held) AS u(id, held)
                         WHERE u.held IS NULL);
    END IF;
    IF NOT (EXISTS (SELECT 1 FROM {schema}.succeeded_jobs s WHERE s.id = ANY(p_ids))
            OR EXISTS (SELECT 1 FROM {schema}.inbox x WHERE x.id = ANY(v_direct))
            OR (cardinality(v_boxed) > 0
                AND EXISTS (SELECT 1 FROM {schema}.jobs j WHERE j.id = ANY(v_boxed)))) THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT array_agg(format('%s (%s)', d.id, d.place) ORDER BY d.id) FROM (
        SELECT s.id, 'succeeded' AS place FROM {schema}.succeeded_jobs s
        WHERE s.id = ANY(p_ids)
        UNION ALL
        SELECT x.id, 'waiting to be taken in' FROM {schema}.inbox x
        WHERE x.id = ANY(v_direct)
        UNION ALL
        SELECT j.id, 'queued, running or dead' FROM {schema}.jobs j
        WHERE j.id = ANY(v_boxed)) d);
END
$$;
