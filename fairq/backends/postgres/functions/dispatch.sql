-- Dispatch: hands out up to p_limit head jobs, trying p_queues in order, each of an eligible
-- tenant with a small (start_tag, head_seq). The arithmetic is fairness.finish_after_dispatch,
-- history.add_usage and rate.after_start / limited_until, in their order, pick after pick.
-- In named steps, each a function:
--
--   dispatch            the call: take-in, each queue in turn, the picks started, V, missed
--   dispatch_queue      one queue's rounds: how many tenants a round reads (the bound)
--   lock_candidates     a round's tenants, read in key order and locked; fresh or changed
--   take_picks          the picks among them, in memory (next_head: the next heads)
--   write_round         the round's tenants written, each once
--   start_picks         the jobs started and their waits counted; each queue's V
--
-- Dispatches of one queue run side by side (docs/internals/scheduler.md, "Parallel
-- dispatch"). A tenant row is the unit of exclusion: a round reads the eligible tenants in
-- (start_tag, head_seq) order and locks the first ones no other transaction holds
-- (FOR UPDATE SKIP LOCKED: a dispatch never waits for a tenant), then makes its picks among
-- them in memory. Another dispatch holding a tenant keeps it until it commits, so concurrent
-- dispatches pick among different tenants; an ack, enqueue or fail that holds a tenant for its
-- few statements is skipped too. Each step below says which part of the bound it keeps.
--
-- A head job is read by its key alone, and no statement here may scan a table: a plan cached
-- while the tables were tiny must still be a key lookup once they are large.
--
-- Cost: a step is a plpgsql call of its own (tens of thousands of instructions each, paid
-- once per call and round, not per job, and called as an expression: a PERFORM would run a
-- query through the executor for it); the steps of every pick (fairness.sql, next_head) are
-- SQL functions the planner inlines, so a pick costs no call.
--
-- Each job is charged its estimate (fairq.policy.cost.estimate): its declared cost, or once
-- its (queue, name) has a sample and it learns its cost, the learned mean (job_costs,
-- costs.sql), read once per name per round (lock_candidates: known, means), or by next_head
-- for a name the round had not read.

-- The head after a pick: the first ready job after the picked one in (priority DESC, seq)
-- order, found from it onwards (its priority first, then the lower ones), so the index
-- entries of jobs already handed out (dead until vacuum reaches them, and all before it) are
-- not walked again; with the estimate it is charged: the mean p_means[k] of its name when it
-- is p_known[k], else read (a name the round had not read), and when it became ready (its
-- wait, counted when it is picked). No row: the tenant has none. An SQL function the planner
-- inlines into take_picks' statement.
CREATE FUNCTION {schema}.next_head(
    p_queue text, p_tenant bigint, p_priority integer, p_after bigint, p_known text[],
    p_means double precision[]
) RETURNS TABLE (
    seq bigint, priority integer, charge double precision, ready_at double precision
) LANGUAGE sql STABLE AS $$
    SELECT n.seq, n.priority, CASE WHEN n.learn_cost THEN coalesce(
               p_means[array_position(p_known, n.name)],
               (SELECT c.mean FROM {schema}.job_costs c
                WHERE c.key = {schema}.cost_key(p_queue, n.name)),
               n.cost) ELSE n.cost END, n.ready_at
    FROM ((SELECT r.seq, r.priority, r.cost, r.name, r.learn_cost, r.ready_at
           FROM {schema}.jobs r
           WHERE r.tenant_id = p_tenant AND r.state = 'ready'
             AND r.priority = p_priority AND r.seq > p_after
           ORDER BY r.priority DESC, r.seq LIMIT 1)
          UNION ALL
          (SELECT r.seq, r.priority, r.cost, r.name, r.learn_cost, r.ready_at
           FROM {schema}.jobs r
           WHERE r.tenant_id = p_tenant AND r.state = 'ready' AND r.priority < p_priority
           ORDER BY r.priority DESC, r.seq LIMIT 1)
          LIMIT 1) n
$$;

-- p_alone names the queues this call dispatches alone: held exclusive (a queue with a cap on
-- its leased jobs, or maintenance's slow path), or no other dispatch of the queue was under way
-- when it began (dequeue.sql: lock_dispatch).
--
-- p_pending: tenant rows this transaction holds and changed but has not written (the acks of
-- ack_dequeue, acks.sql: succeeded_runs), of queues in p_queues. They are written here, each
-- once with the picks made from it: a queue's first round reads them from memory beside the
-- tenants it scans (whose scan skips them: their stored keys are stale) as fresh candidates;
-- those of a queue that had no round are written at the end.
--
-- V = max(V, S of the call's last pick in the queue): one dispatch's picks come in ascending
-- key order, and V never decreases. The queues' rows are written last, in name order, so a
-- dispatch holds its queue's row only while it commits. A call that could hand out nothing
-- although eligible tenants, or inbox rows, were there (their tenants held by others, or
-- changed) ends with one row whose l_id is NULL, so that the caller tries again rather than
-- wait for new work. p_hold: the relay's dequeue (DequeueParams.hold): the jobs are handed out
-- unclaimed, each leased until p_now + p_hold; NULL: claimed, their runs starting now under
-- their own leases.
CREATE FUNCTION {schema}.dispatch(
    p_queues text[], p_worker text, p_now double precision, p_limit integer, p_alone text[],
    p_pending {schema}.tenants[] DEFAULT NULL, p_hold double precision DEFAULT NULL
) RETURNS TABLE (
    l_id text, l_name text, l_queue text, l_tenant text, l_payload text, l_attempts integer,
    l_leases integer, l_max_attempts integer, l_started_at double precision,
    l_deadline double precision, l_lease_timeout double precision, l_cost double precision,
    l_ready_at double precision, l_headers text
) LANGUAGE plpgsql AS $$
DECLARE
    v_seqs bigint[] := ARRAY[]::bigint[];  -- the jobs handed out, in order
    v_names text[] := ARRAY[]::text[];     -- and their tenants
    v_charges double precision[] := ARRAY[]::double precision[];  -- and estimates
    v_clocks text[] := ARRAY[]::text[];    -- the queues dispatched from, their new V and count
    v_clock_values double precision[] := ARRAY[]::double precision[];
    v_clock_counts integer[] := ARRAY[]::integer[];
    v_open text[] := ARRAY[]::text[];      -- queues that had room (for the missed row)
    v_flushed text[] := ARRAY[]::text[];   -- queues whose rows of p_pending are written
    v_queue text;
    q record;  -- one queue's picks (dispatch_queue)
BEGIN
    -- jobs waiting in the inbox whose tenants this call can take come in first, for all the
    -- queues at once (enqueue.sql: take_in, which changes tenant rows: p_pending first)
    IF EXISTS (SELECT 1 FROM unnest(p_queues) AS n
               WHERE EXISTS (SELECT 1 FROM {schema}.inbox i WHERE i.queue = n)) THEN
        PERFORM {schema}.write_tenants(p_pending, ARRAY[]::text[]);
        p_pending := NULL;
        PERFORM {schema}.take_in(p_queues, NULL, p_now, 256);
    END IF;
    FOREACH v_queue IN ARRAY p_queues LOOP
        EXIT WHEN cardinality(v_seqs) >= p_limit;
        q := {schema}.dispatch_queue(v_queue, v_queue = ANY(p_alone), p_now,
                                     p_limit - cardinality(v_seqs), p_pending);
        v_seqs := v_seqs || q.seqs;
        v_names := v_names || q.names;
        v_charges := v_charges || q.charges;
        v_open := v_open || CASE WHEN q.opened THEN v_queue END;
        v_flushed := v_flushed || CASE WHEN q.flushed THEN v_queue END;
        IF q.vclock IS NOT NULL THEN
            v_clocks := v_clocks || v_queue;
            v_clock_values := v_clock_values || q.vclock;
            v_clock_counts := v_clock_counts || cardinality(q.seqs);
        END IF;
    END LOOP;
    IF p_pending IS NOT NULL THEN  -- the rows no round wrote (queue full, or had no turn)
        PERFORM {schema}.write_tenants(p_pending, array_remove(v_flushed, NULL));
    END IF;
    RETURN QUERY SELECT * FROM {schema}.start_picks(
        v_seqs, v_names, v_charges, p_worker, p_now, p_hold, v_clocks, v_clock_values,
        v_clock_counts);
    IF cardinality(v_seqs) = 0 AND EXISTS (
        SELECT 1 FROM unnest(array_remove(v_open, NULL)) AS n
        WHERE EXISTS (SELECT 1 FROM {schema}.tenants e
                      WHERE e.queue = n AND e.start_tag IS NOT NULL)
           OR EXISTS (SELECT 1 FROM {schema}.inbox i WHERE i.queue = n)) THEN
        RETURN NEXT;  -- missed: eligible tenants, or new jobs, of tenants others held
    END IF;
END
$$;

-- One queue's rounds, up to p_limit picks; p_mine: dispatch's p_pending, of which the rows of
-- p_queue are candidates of the first round (flushed: written). How many tenants a round
-- reads (k = what is left to hand out, at most 64; the parallel-dispatch bound):
-- * alone: the k smallest eligible tenants it can lock, and at most k picks among them: exact,
--   as one dispatch at a time always was. A tenant not read has a key at or above the k-th one
--   read, and while fewer than k picks are made, some tenant read is still unpicked, with a key
--   at or below it. The next round reads again, until every eligible tenant was read.
-- * beside other dispatches: one round. One that finds fewer than 2k eligible tenants (held
--   ones included, counted up to 2k) reads only half of them, so that the others find some
--   free, and may make its k picks among those: each pick then passes at most the k - 1
--   tenants it left unread. Reading p_mine too changes neither argument: the picks are capped
--   by the tenants scanned.
-- A queue with a cap on its leased jobs (max_in_flight) is dispatched alone, under its
-- exclusive lock: it hands out at most its room, max_in_flight - in_flight (a round reads at
-- most the room's worth of tenants, exact as above, k being the room; a full queue reads none
-- and the next queue is tried), and dispatch adds what it handed out to in_flight.
CREATE FUNCTION {schema}.dispatch_queue(
    p_queue text, p_alone boolean, p_now double precision, p_limit integer,
    p_mine {schema}.tenants[], OUT seqs bigint[], OUT names text[],
    OUT charges double precision[], OUT vclock double precision, OUT opened boolean,
    OUT flushed boolean
) LANGUAGE plpgsql AS $$
DECLARE
    v_half_life double precision;
    v_room bigint;    -- what the queue may hand out under its cap; NULL: no cap
    v_want integer;   -- what a round may hand out
    v_read integer;   -- how many tenants it reads
    v_count integer;  -- eligible tenants, held ones included, up to 2 * v_want
    c record;         -- the round's candidates (lock_candidates)
    p record;         -- and its picks (take_picks)
BEGIN
    seqs := ARRAY[]::bigint[];
    names := ARRAY[]::text[];
    charges := ARRAY[]::double precision[];
    opened := false;
    flushed := false;
    SELECT coalesce(q.half_life, 60.0::double precision), q.max_in_flight - q.in_flight
    INTO v_half_life, v_room FROM {schema}.queues q WHERE q.name = p_queue;
    FOR v_round IN 1..16 LOOP
        v_want := LEAST(p_limit - cardinality(seqs), 64,
                        coalesce(v_room - cardinality(seqs), 64));
        EXIT WHEN v_want <= 0;  -- full: the next queue is tried
        opened := true;
        v_read := v_want;
        IF NOT p_alone THEN
            SELECT count(*) INTO v_count FROM (
                SELECT 1 FROM {schema}.tenants e
                WHERE e.queue = p_queue AND e.start_tag IS NOT NULL
                ORDER BY e.start_tag, e.head_seq
                LIMIT 2 * v_want) counted;
            EXIT WHEN v_count = 0 AND coalesce(cardinality(p_mine), 0) = 0;
            IF v_count < 2 * v_want THEN
                v_read := (v_count + 1) / 2;
            END IF;
        END IF;
        c := {schema}.lock_candidates(p_queue, v_read, p_mine);
        EXIT WHEN c.cands IS NULL;  -- every eligible tenant is held by another
        p := {schema}.take_picks(p_queue, p_now, v_half_life, LEAST(
                 CASE WHEN c.scanned < v_read THEN p_limit  -- every free tenant was read
                      WHEN v_read = v_want THEN c.fresh
                      ELSE v_want END,                     -- half of them: see the top
                 p_limit - cardinality(seqs),
                 coalesce(v_room - cardinality(seqs), p_limit))::integer,
             c.known, c.means, c.cands, c.starts, c.heads, c.prios, c.costs, c.readies);
        v_count := {schema}.write_round(p_queue, p.cands, p.picked, c.mine, c.cands);
        seqs := seqs || p.seqs;
        names := names || p.names;
        charges := charges || p.charged;
        vclock := coalesce(p.vclock, vclock);
        flushed := true;
        p_mine := NULL;  -- candidates of the first round only
        EXIT WHEN NOT p_alone OR c.scanned < v_read;  -- one round, or until all were read
    END LOOP;
END
$$;

-- A round's candidates: the first p_read eligible tenants of the queue no other transaction
-- holds, locked (its scan skips p_mine, whose stored keys are stale), then the rows of p_mine
-- of the queue, in the key order each was seen in; each with its head (read by its key alone,
-- the fence, OFFSET 0, keeping it so: without it, 1,095 buffers once in six runs of
-- tests/postgres/test_cached_plans.py): costs (its estimate: its cost, or when it learns its
-- cost, learns, the learned mean of its name, where there is one), jobs (names), readies (when
-- it became ready). Fresh: its key as locked
-- is the one the scan read (so is its head job, which this statement's snapshot shows as it
-- is); p_mine are held, so fresh. A candidate whose key changed between the round's snapshot
-- and its lock (another dispatch picked from it and committed meanwhile, so its key grew; or a
-- job of it became ready) is held but not picked from (starts: NULL): its new key says nothing
-- about the tenants the round did not read, and its new head may be a job this statement's
-- snapshot does not show. Alone, the next round reads it again; beside others, the call hands
-- out fewer jobs. fresh: the fresh ones scanned; scanned: the ones scanned. known, means: the
-- learned mean of each name among the heads that learn their cost and has a sample (one read
-- per name).
CREATE FUNCTION {schema}.lock_candidates(
    p_queue text, p_read integer, p_mine {schema}.tenants[], OUT cands {schema}.tenants[],
    OUT starts double precision[], OUT heads bigint[], OUT prios integer[],
    OUT costs double precision[], OUT jobs text[], OUT learns boolean[], OUT mine boolean[],
    OUT fresh integer, OUT scanned integer, OUT known text[], OUT means double precision[],
    OUT readies double precision[]
) LANGUAGE plpgsql AS $$
BEGIN
    SELECT array_agg(c.x ORDER BY c.ord),
           array_agg(CASE WHEN c.fresh THEN (c.x).start_tag END ORDER BY c.ord),
           array_agg((c.x).head_seq ORDER BY c.ord), array_agg(c.priority ORDER BY c.ord),
           array_agg(c.cost ORDER BY c.ord), array_agg(c.name ORDER BY c.ord),
           array_agg(c.learn_cost ORDER BY c.ord), array_agg(c.mine ORDER BY c.ord),
           count(*) FILTER (WHERE c.fresh AND NOT c.mine), count(*) FILTER (WHERE NOT c.mine),
           array_agg(c.ready_at ORDER BY c.ord)
    INTO cands, starts, heads, prios, costs, jobs, learns, mine, fresh, scanned, readies
    FROM (SELECT s.x, s.mine, CASE WHEN h.state = 'ready' THEN h.priority END AS priority,
                 h.cost, h.name, h.learn_cost, h.ready_at,
                 row_number() OVER (ORDER BY s.seen_start, s.seen_head) AS ord,
                 coalesce(((s.x).start_tag, (s.x).head_seq)
                          = (s.seen_start, s.seen_head), false) AS fresh
          FROM ((SELECT l.x, e.start_tag AS seen_start, e.head_seq AS seen_head,
                        false AS mine
                 FROM {schema}.tenants e
                 CROSS JOIN LATERAL (
                     SELECT x FROM {schema}.tenants x WHERE x.id = e.id
                     FOR UPDATE SKIP LOCKED) l
                 WHERE e.queue = p_queue AND e.start_tag IS NOT NULL
                   AND e.id <> ALL(ARRAY(SELECT m.id FROM unnest(p_mine) AS m
                                         WHERE m.queue = p_queue))
                 ORDER BY e.start_tag, e.head_seq
                 LIMIT p_read)
                UNION ALL
                SELECT m, m.start_tag, m.head_seq, true FROM unnest(p_mine) AS m
                WHERE m.queue = p_queue) s
          LEFT JOIN LATERAL (
              SELECT j.priority, j.cost, j.name, j.learn_cost, j.state, j.ready_at
              FROM {schema}.jobs j
              WHERE j.seq = (s.x).head_seq OFFSET 0) h ON true) c;
    SELECT array_agg(c.name), array_agg(c.mean) INTO known, means
    FROM {schema}.job_costs c
    WHERE c.key = ANY(ARRAY(SELECT DISTINCT {schema}.cost_key(p_queue, u.name)
                            FROM unnest(jobs, learns) AS u(name, learns) WHERE u.learns));
    FOR i IN 1..coalesce(cardinality(cands), 0) LOOP
        IF starts[i] IS NOT NULL AND prios[i] IS NULL THEN
            RAISE EXCEPTION 'fairq: an eligible tenant''s head job in % is not ready', p_queue;
        END IF;
        IF learns[i] THEN  -- its estimate: the mean of its name, when there is a sample
            costs[i] := coalesce(means[array_position(known, jobs[i])], costs[i]);
        END IF;
    END LOOP;
END
$$;

-- Up to p_most picks among a round's candidates, in memory, each from the candidate with the
-- smallest (start, head) (starts NULL: not to be picked): V = S; F = S + estimate / w (costs:
-- the head's estimate, lock_candidates); usage, GCRA and S = F while still eligible
-- (fairness.sql); the next head (next_head, charged as it is read); the job's wait
-- (p_now - readies[b]) counted in its tenant's row (fig_keys, fig_counts: figures.sql; a row
-- whose counts are of an earlier slot starts afresh: write_round adds the old ones to
-- figures). Returns the candidates as the picks left them, the picks per candidate, the jobs,
-- their tenants and estimates (NULL: none), and the new V (NULL: no pick).
CREATE FUNCTION {schema}.take_picks(
    p_queue text, p_now double precision, p_half_life double precision, p_most integer,
    p_known text[], p_means double precision[], INOUT cands {schema}.tenants[],
    INOUT starts double precision[], INOUT heads bigint[], INOUT prios integer[],
    INOUT costs double precision[], INOUT readies double precision[], OUT picked integer[],
    OUT seqs bigint[], OUT names text[], OUT charged double precision[], OUT vclock double precision
) LANGUAGE plpgsql AS $$
DECLARE
    t {schema}.tenants%ROWTYPE;
    b integer;  -- the candidate picked from
    v_next record;
    v_slot bigint := {schema}.fig_slot(p_now);
    v_key integer;
BEGIN
    picked := array_fill(0, ARRAY[cardinality(cands)]);
    WHILE coalesce(cardinality(seqs), 0) < p_most LOOP
        b := NULL;
        FOR i IN 1..cardinality(cands) LOOP
            IF starts[i] IS NOT NULL AND (b IS NULL OR (starts[i], heads[i]) < (starts[b], heads[b])) THEN
                b := i;
            END IF;
        END LOOP;
        EXIT WHEN b IS NULL;
        t := cands[b];
        IF t.head_seq IS NULL THEN
            RAISE EXCEPTION 'fairq: eligible tenant row % has no head job', t.id;
        END IF;
        seqs := seqs || t.head_seq;
        names := names || t.tenant;
        charged := charged || costs[b];
        vclock := t.start_tag;
        t.usage := {schema}.usage_after(t.usage, t.usage_at, p_now, p_half_life,
                                        t.start_tag + costs[b] / t.weight - t.finish_tag);
        t.usage_at := GREATEST(t.usage_at, p_now);
        t.finish_tag := t.start_tag + costs[b] / t.weight;
        t.tat := {schema}.gcra_tat(t.tat, p_now, t.rate_count, t.rate_period);
        t.limited_until := {schema}.gcra_limited(
            t.tat, p_now, t.rate_count, t.rate_period, t.rate_burst);
        t.ready := t.ready - 1;
        t.running := t.running + 1;
        t.start_tag := CASE WHEN {schema}.eligible(
            t.ready, t.running, t.max_running, t.weight, t.limited_until) THEN t.finish_tag END;
        v_key := {schema}.fig_bucket(p_now - readies[b]);
        t.fig_counts := {schema}.fig_counts_after(
            t.fig_keys, t.fig_counts, t.fig_slot = v_slot, v_key);
        t.fig_keys := {schema}.fig_keys_after(t.fig_keys, t.fig_slot = v_slot, v_key);
        t.fig_slot := v_slot;
        SELECT n.seq, n.priority, n.charge, n.ready_at INTO v_next
        FROM {schema}.next_head(p_queue, t.id, prios[b], t.head_seq, p_known, p_means) n;
        t.head_seq := v_next.seq;
        cands[b] := t;
        starts[b] := t.start_tag;
        heads[b] := t.head_seq;
        prios[b] := v_next.priority;
        costs[b] := v_next.charge;  -- its estimate, final
        readies[b] := v_next.ready_at;
        picked[b] := picked[b] + 1;
    END LOOP;
END
$$;

-- The round's tenants, as the picks (and acks: p_mine) left them, held since they were read;
-- the ones neither picked from nor of p_mine are not written. A slot is never taken over a
-- cap: a row whose running would pass its stored max_running is refused, and the call fails.
-- A row picked from whose waits take_picks counted in a new slot has its counts of the earlier
-- slot (p_was: the rows as the round read them) added to figures first (fig_flush).
-- Returns how many were written (called as an expression, not PERFORM: a plpgsql PERFORM
-- runs a query through the executor, an expression's call does not).
CREATE FUNCTION {schema}.write_round(
    p_queue text, p_cands {schema}.tenants[], p_picked integer[], p_mine boolean[],
    p_was {schema}.tenants[]
) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_changed integer := 0;
    v_written integer;
    v_flush {schema}.tenants[];  -- rows whose counts are of an earlier slot
BEGIN
    FOR i IN 1..cardinality(p_cands) LOOP
        IF p_picked[i] > 0 OR p_mine[i] THEN
            v_changed := v_changed + 1;
        END IF;
        IF p_picked[i] > 0 AND (p_was[i]).fig_slot <> (p_cands[i]).fig_slot
           AND cardinality((p_was[i]).fig_keys) > 0 THEN
            v_flush := v_flush || p_was[i];
        END IF;
    END LOOP;
    IF v_flush IS NOT NULL THEN
        PERFORM {schema}.fig_flush(v_flush);
    END IF;
    UPDATE {schema}.tenants x
    SET finish_tag = d.finish_tag, start_tag = d.start_tag, usage = d.usage,
        usage_at = d.usage_at, tat = d.tat, limited_until = d.limited_until,
        head_seq = d.head_seq, ready = d.ready, running = d.running,
        succeeded = d.succeeded, kept = d.kept, fig_slot = d.fig_slot, fig_keys = d.fig_keys,
        fig_counts = d.fig_counts
    FROM unnest(p_cands) WITH ORDINALITY AS d
    JOIN unnest(p_picked, p_mine) WITH ORDINALITY AS p(picks, mine, ord)
      ON p.ord = d.ordinality
    WHERE x.id = d.id AND (p.picks > 0 OR p.mine)
      AND (p.picks = 0 OR x.max_running IS NULL OR d.running <= x.max_running);
    GET DIAGNOSTICS v_written = ROW_COUNT;
    IF v_written < v_changed THEN
        RAISE EXCEPTION 'fairq: a tenant of queue % refused a slot over its cap', p_queue;
    END IF;
    RETURN v_written;
END
$$;

-- The jobs picked, started (p_seqs[k] of tenant p_names[k], charged p_charges[k]) and
-- returned in the order picked (their waits are counted in their tenants' rows: take_picks).
-- Then each queue
-- picked from (p_clocks[k]) gets its V (p_values[k]) and, under a cap, its count in flight
-- (p_counts[k] more), in name order, last: a queue's row is held only while the call commits.
CREATE FUNCTION {schema}.start_picks(
    p_seqs bigint[], p_names text[], p_charges double precision[], p_worker text,
    p_now double precision, p_hold double precision, p_clocks text[],
    p_values double precision[], p_counts integer[]
) RETURNS TABLE (
    l_id text, l_name text, l_queue text, l_tenant text, l_payload text, l_attempts integer,
    l_leases integer, l_max_attempts integer, l_started_at double precision,
    l_deadline double precision, l_lease_timeout double precision, l_cost double precision,
    l_ready_at double precision, l_headers text
) LANGUAGE plpgsql AS $$
DECLARE
    k integer;
BEGIN
    RETURN QUERY
    WITH started AS (
        UPDATE {schema}.jobs j
        SET state = 'running', attempts = j.attempts + 1, leases = j.leases + 1,
            started_at = p_now, deadline = p_now + coalesce(p_hold, j.lease_timeout),
            worker_id = p_worker, charged = c.charge, claimed = p_hold IS NULL
        FROM unnest(p_seqs, p_charges) AS c(seq, charge)
        WHERE j.seq = c.seq
        RETURNING j.seq, j.id, j.name, j.queue, j.payload, j.attempts, j.leases,
                  j.max_attempts, j.started_at, j.deadline, j.lease_timeout, j.charged,
                  j.ready_at, j.headers
    )
    SELECT s.id, s.name, s.queue, o.tenant, s.payload, s.attempts, s.leases, s.max_attempts,
           s.started_at, s.deadline, s.lease_timeout, s.charged, s.ready_at, s.headers
    FROM unnest(p_seqs, p_names) WITH ORDINALITY AS o(seq, tenant, ord)
    JOIN started s ON s.seq = o.seq
    ORDER BY o.ord;
    FOR k IN SELECT o.k FROM unnest(p_clocks) WITH ORDINALITY AS o(name, k) ORDER BY o.name
    LOOP
        UPDATE {schema}.queues q
        SET vclock = GREATEST(q.vclock, p_values[k]),
            in_flight = q.in_flight
                + CASE WHEN q.max_in_flight IS NULL THEN 0 ELSE p_counts[k] END
        WHERE q.name = p_clocks[k];
    END LOOP;
END
$$;
