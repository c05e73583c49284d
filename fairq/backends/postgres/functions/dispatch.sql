-- Hands out up to p_limit head jobs, trying p_queues in order, each of an eligible tenant with
-- a small (start_tag, head_seq). The arithmetic is fairness.finish_after_dispatch,
-- history.add_usage and rate.after_start / limited_until, in their order, pick after pick.
--
-- Dispatches of one queue run side by side (docs/internals/scheduler.md, "Parallel
-- dispatch"). A tenant row is the unit of exclusion: a round reads the eligible tenants in
-- (start_tag, head_seq) order and locks the first ones no other transaction holds
-- (FOR UPDATE SKIP LOCKED: a dispatch never waits for a tenant), then makes its picks among
-- them in memory. Another dispatch holding a tenant keeps it until it commits, so concurrent
-- dispatches pick among different tenants; an ack, enqueue or fail that holds a tenant for its
-- few statements is skipped too.
--
-- p_alone names the queues this call dispatches alone: held exclusive (a queue with a cap on
-- its leased jobs, or maintenance's slow path), or no other dispatch of the queue was under way
-- when it began (dequeue.sql: lock_dispatch). Alone, a round reads the k smallest eligible
-- tenants it can lock (k = what is left to hand out, at most 64) and makes at most k picks
-- among them: exact, as one dispatch at a time always was. A tenant not read has a key at or
-- above the k-th one read, and while fewer than k picks are made, some tenant read is still
-- unpicked, with a key at or below it. Beside other dispatches, a round that finds fewer than
-- 2k eligible tenants (held ones included, counted up to 2k) reads only half of them, so that
-- the others find some free, and may make its k picks among those: each pick then passes at
-- most the k - 1 tenants it left unread.
--
-- A candidate whose key changed between the round's snapshot and its lock (another dispatch
-- picked from it and committed meanwhile, so its key grew; or a job of it became ready) is
-- held but not picked from: its new key says nothing about the tenants the round did not
-- read, and its new head may be a job this statement's snapshot does not show. Alone, the next round reads it
-- again; beside others, the call hands out fewer jobs. A call that could hand out nothing
-- although eligible tenants, or inbox rows, were there (their tenants held by others, or
-- changed) ends with one row whose l_id is NULL, so that the caller tries again rather than
-- wait for new work.
--
-- A head job is read by its key alone, and no statement here may scan a table: a plan cached
-- while the tables were tiny must still be a key lookup once they are large.
--
-- A queue with a cap on its leased jobs (max_in_flight) is dispatched alone, under its
-- exclusive lock: it hands out at most its room, max_in_flight - in_flight, and adds what it
-- handed out to in_flight: a round then reads at most the room's worth of tenants (exact as
-- above, k being the room), and a full queue reads none and the next queue is tried. Who is
-- picked is decided as without the cap.
--
-- V = max(V, S of the call's last pick in the queue): one dispatch's picks come in ascending
-- key order, and V never decreases. The queues' rows are written last, in name order, so a
-- dispatch holds its queue's row only while it commits.
--
-- p_pending: tenant rows this transaction holds and changed but has not written (the acks of
-- ack_dequeue, acks.sql: succeeded_runs), of queues in p_queues. They are written here, each
-- once with the picks made from it: a queue's first round reads them from memory beside the
-- tenants it scans (whose scan skips them: their stored keys are stale) as fresh candidates;
-- those of a queue that had no round are written at the end.
--
-- Each job is charged its estimate (fairq.policy.cost.estimate): its declared cost, or once
-- its (queue, name) has a sample and it learns its cost, the learned mean (job_costs, read
-- once per name per call: costs.sql); charged and l_cost say which. p_hold: the relay's
-- dequeue (DequeueParams.hold): the jobs are handed out unclaimed, each leased until
-- p_now + p_hold; NULL: claimed, their runs starting now under their own leases.
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
    v_cands {schema}.tenants[];  -- the round's tenants, changed in memory pick by pick
    v_prios integer[];            -- each one's head job: its priority, declared cost, name
    v_costs double precision[];   -- and whether it learns its cost
    v_jobs text[];
    v_learns boolean[];
    v_picked integer[];           -- picks per tenant in this round
    v_starts double precision[];  -- their keys (start_tag, head_seq), for the picks; NULL:
    v_heads bigint[];             -- not to be picked (not eligible, or changed since read)
    v_mine {schema}.tenants[];    -- the queue's rows of p_pending, in its first round
    v_skip bigint[];              -- and their ids, which the scan skips
    v_is_mine boolean[];          -- per candidate: one of them
    v_scanned integer;            -- candidates the scan read
    v_flushed text[] := ARRAY[]::text[];  -- queues whose rows of p_pending are written
    v_seqs bigint[] := ARRAY[]::bigint[];  -- the jobs handed out, in order
    v_names text[] := ARRAY[]::text[];     -- and their tenants
    v_charges double precision[] := ARRAY[]::double precision[];  -- and estimates
    v_known text[] := ARRAY[]::text[];     -- the learned costs read: queue/name, runs, mean
    v_known_runs integer[] := ARRAY[]::integer[];
    v_known_means double precision[] := ARRAY[]::double precision[];
    v_clocks text[] := ARRAY[]::text[];    -- the queues dispatched from, their new V and count
    v_clock_values double precision[] := ARRAY[]::double precision[];
    v_clock_counts integer[] := ARRAY[]::integer[];
    v_open text[] := ARRAY[]::text[];      -- queues that had room (for the missed row)
    t {schema}.tenants%ROWTYPE;
    v_queue text;
    v_alone boolean;
    v_half_life double precision;
    v_room bigint;                -- what the queue may hand out under its cap; NULL: no cap
    v_queue_taken integer;        -- handed out from this queue
    v_vclock double precision;
    v_want integer;               -- what this round may hand out
    v_read integer;               -- how many tenants it reads
    v_count integer;              -- eligible tenants, held ones included, up to 2 * v_want
    v_n integer;
    v_fresh integer;              -- candidates that may be picked
    v_cap integer;                -- picks this round may make
    v_rounds integer;
    v_best integer;
    v_round integer;
    v_next bigint;
    v_next_prio integer;
    v_next_cost double precision;
    v_next_job text;
    v_next_learn boolean;
    v_charge double precision;
    v_at integer;
    v_runs integer;
    v_mean double precision;
    v_finish double precision;
    v_interval double precision;
    v_until double precision;
    v_taken integer := 0;
    v_changed integer;            -- tenants picked in this round
    v_written integer;
    v_k bigint;
BEGIN
    -- jobs waiting in the inbox whose tenants this call can take come in first, for all the
    -- queues at once (enqueue.sql: take_in); those tenants are then held by this call too
    IF EXISTS (SELECT 1 FROM unnest(p_queues) AS n
               WHERE EXISTS (SELECT 1 FROM {schema}.inbox i WHERE i.queue = n)) THEN
        -- take_in changes tenant rows, ours too: p_pending is written first, then read again
        UPDATE {schema}.tenants x
        SET finish_tag = d.finish_tag, start_tag = d.start_tag, usage = d.usage,
            usage_at = d.usage_at, running = d.running, succeeded = d.succeeded, kept = d.kept
        FROM unnest(p_pending) AS d
        WHERE x.id = d.id;
        p_pending := NULL;
        PERFORM {schema}.take_in(p_queues, NULL, p_now, 256);
    END IF;
    FOREACH v_queue IN ARRAY p_queues LOOP
        v_vclock := NULL;
        v_queue_taken := 0;
        v_rounds := 0;
        v_alone := v_queue = ANY(p_alone);
        SELECT coalesce(q.half_life, 60.0::double precision), q.max_in_flight - q.in_flight
        INTO v_half_life, v_room
        FROM {schema}.queues q WHERE q.name = v_queue;
        WHILE v_taken < p_limit AND v_rounds < 16 LOOP
            v_rounds := v_rounds + 1;
            v_want := LEAST(p_limit - v_taken, 64, coalesce(v_room - v_queue_taken, 64));
            EXIT WHEN v_want <= 0;  -- full: the next queue is tried
            IF v_rounds = 1 THEN
                v_open := v_open || v_queue;
            END IF;
            v_read := v_want;
            v_mine := ARRAY[]::{schema}.tenants[];
            IF v_rounds = 1 AND p_pending IS NOT NULL THEN
                v_mine := ARRAY(SELECT m FROM unnest(p_pending) AS m WHERE m.queue = v_queue);
            END IF;
            v_skip := ARRAY(SELECT m.id FROM unnest(v_mine) AS m);
            IF NOT v_alone THEN
                SELECT count(*) INTO v_count FROM (
                    SELECT 1 FROM {schema}.tenants e
                    WHERE e.queue = v_queue AND e.start_tag IS NOT NULL
                    ORDER BY e.start_tag, e.head_seq
                    LIMIT 2 * v_want) counted;
                EXIT WHEN v_count = 0 AND cardinality(v_mine) = 0;
                IF v_count < 2 * v_want THEN
                    v_read := (v_count + 1) / 2;
                END IF;
            END IF;
            -- the first v_read eligible tenants no other transaction holds, locked; fresh: its
            -- key as locked is the one the scan read (so is its head job, which this
            -- statement's snapshot shows as it is)
            SELECT array_agg(c.x ORDER BY c.ord), array_agg(c.priority ORDER BY c.ord),
                   array_agg(c.cost ORDER BY c.ord), array_agg(c.name ORDER BY c.ord),
                   array_agg(c.learn_cost ORDER BY c.ord),
                   array_agg(CASE WHEN c.fresh THEN (c.x).start_tag END ORDER BY c.ord),
                   array_agg((c.x).head_seq ORDER BY c.ord), array_agg(c.mine ORDER BY c.ord),
                   count(*) FILTER (WHERE c.fresh AND NOT c.mine),
                   count(*) FILTER (WHERE NOT c.mine)
            INTO v_cands, v_prios, v_costs, v_jobs, v_learns, v_starts, v_heads, v_is_mine,
                 v_fresh, v_scanned
            FROM (SELECT s.x, s.mine, CASE WHEN h.state = 'ready' THEN h.priority END AS priority,
                         h.cost, h.name, h.learn_cost,
                         row_number() OVER (ORDER BY s.seen_start, s.seen_head) AS ord,
                         coalesce(((s.x).start_tag, (s.x).head_seq)
                                  = (s.seen_start, s.seen_head), false) AS fresh
                  FROM ((SELECT l.x, e.start_tag AS seen_start, e.head_seq AS seen_head,
                        false AS mine
                        FROM {schema}.tenants e
                        CROSS JOIN LATERAL (
                            SELECT x FROM {schema}.tenants x WHERE x.id = e.id
                            FOR UPDATE SKIP LOCKED) l
                        WHERE e.queue = v_queue AND e.start_tag IS NOT NULL
                          AND e.id <> ALL(v_skip)
                        ORDER BY e.start_tag, e.head_seq
                        LIMIT v_read)
                        UNION ALL
                        SELECT m, m.start_tag, m.head_seq, true FROM unnest(v_mine) AS m) s
                  -- OFFSET 0: the head read by its key alone (without the fence, 1,095
                  -- buffers once in six runs of tests/postgres/test_cached_plans.py)
                  LEFT JOIN LATERAL (
                      SELECT j.priority, j.cost, j.name, j.learn_cost, j.state
                      FROM {schema}.jobs j
                      WHERE j.seq = (s.x).head_seq OFFSET 0) h ON true) c;
            EXIT WHEN v_cands IS NULL;  -- every eligible tenant is held by another
            v_n := cardinality(v_cands);
            FOR i IN 1..v_n LOOP
                IF v_starts[i] IS NOT NULL AND v_prios[i] IS NULL THEN
                    RAISE EXCEPTION 'fairq: an eligible tenant''s head job in % is not ready',
                        v_queue;
                END IF;
            END LOOP;
            v_cap := CASE WHEN v_scanned < v_read THEN p_limit  -- every free tenant was read
                          WHEN v_read = v_want THEN v_fresh
                          ELSE v_want END;                -- half of them: see the top
            v_picked := array_fill(0, ARRAY[v_n]);
            v_changed := 0;
            v_round := 0;
            WHILE v_taken < p_limit AND v_round < v_cap
                  AND (v_room IS NULL OR v_queue_taken < v_room) LOOP
                v_best := NULL;
                FOR i IN 1..v_n LOOP
                    IF v_starts[i] IS NOT NULL AND (v_best IS NULL
                        OR (v_starts[i], v_heads[i]) < (v_starts[v_best], v_heads[v_best])) THEN
                        v_best := i;
                    END IF;
                END LOOP;
                EXIT WHEN v_best IS NULL;
                t := v_cands[v_best];
                IF t.head_seq IS NULL THEN
                    RAISE EXCEPTION 'fairq: eligible tenant row % has no head job', t.id;
                END IF;
                v_seqs := v_seqs || t.head_seq;
                v_names := v_names || t.tenant;
                -- the next head: the first ready job after this one in (priority DESC, seq)
                -- order, found from it onwards, so the index entries of jobs already handed
                -- out (dead until vacuum reaches them, and all before it) are not walked again
                -- (SELECT INTO sets v_next to NULL when there is none)
                SELECT r.seq, r.priority, r.cost, r.name, r.learn_cost
                INTO v_next, v_next_prio, v_next_cost, v_next_job, v_next_learn
                FROM {schema}.jobs r
                WHERE r.tenant_id = t.id AND r.state = 'ready'
                  AND r.priority = v_prios[v_best] AND r.seq > t.head_seq
                ORDER BY r.priority DESC, r.seq
                LIMIT 1;
                IF v_next IS NULL THEN
                    SELECT r.seq, r.priority, r.cost, r.name, r.learn_cost
                    INTO v_next, v_next_prio, v_next_cost, v_next_job, v_next_learn
                    FROM {schema}.jobs r
                    WHERE r.tenant_id = t.id AND r.state = 'ready'
                      AND r.priority < v_prios[v_best]
                    ORDER BY r.priority DESC, r.seq
                    LIMIT 1;
                END IF;
                -- the estimate: the declared cost, or the learned mean of its (queue, name)
                v_charge := v_costs[v_best];
                IF v_learns[v_best] THEN
                    v_at := array_position(v_known, v_queue || '/' || v_jobs[v_best]);
                    IF v_at IS NULL THEN  -- SELECT INTO: NULL when it has no sample yet
                        SELECT c.runs, c.mean INTO v_runs, v_mean FROM {schema}.job_costs c
                        WHERE c.key = {schema}.cost_key(v_queue, v_jobs[v_best]);
                        v_known := v_known || (v_queue || '/' || v_jobs[v_best]);
                        v_known_runs := v_known_runs || coalesce(v_runs, 0);
                        v_known_means := v_known_means || coalesce(v_mean, 0.0);
                        v_at := cardinality(v_known);
                    END IF;
                    IF v_known_runs[v_at] > 0 THEN
                        v_charge := v_known_means[v_at];
                    END IF;
                END IF;
                v_charges := v_charges || v_charge;
                -- V = S; F = S + estimate / w
                v_vclock := t.start_tag;
                v_finish := t.start_tag + v_charge / t.weight;
                -- usage = max(decayed(usage, usage_at, now) + (F_new - F_old), 0)
                t.usage := GREATEST(
                    {schema}.decayed(t.usage, t.usage_at, p_now, v_half_life)
                    + (v_finish - t.finish_tag),
                    0.0::double precision);
                t.usage_at := GREATEST(t.usage_at, p_now);
                t.finish_tag := v_finish;
                -- GCRA: tat = max(tat, now) + interval; limited until tat - tolerance if after now
                v_until := NULL;
                IF t.rate_count IS NOT NULL THEN
                    v_interval := t.rate_period / t.rate_count;
                    IF t.tat IS NULL THEN
                        t.tat := p_now + v_interval;
                    ELSE
                        t.tat := GREATEST(t.tat, p_now) + v_interval;
                    END IF;
                    IF t.tat - v_interval * (t.rate_burst - 1) > p_now THEN
                        v_until := t.tat - v_interval * (t.rate_burst - 1);
                    END IF;
                END IF;
                t.limited_until := v_until;
                t.ready := t.ready - 1;
                t.running := t.running + 1;
                -- then S = F while still eligible
                t.start_tag := CASE WHEN t.ready > 0
                    AND (t.max_running IS NULL OR t.running < t.max_running)
                    AND t.weight > 0 AND v_until IS NULL THEN v_finish END;
                t.head_seq := v_next;
                v_cands[v_best] := t;
                v_starts[v_best] := t.start_tag;
                v_heads[v_best] := t.head_seq;
                v_prios[v_best] := v_next_prio;
                v_costs[v_best] := v_next_cost;
                v_jobs[v_best] := v_next_job;
                v_learns[v_best] := v_next_learn;
                IF v_picked[v_best] = 0 THEN
                    v_changed := v_changed + 1;
                END IF;
                v_picked[v_best] := v_picked[v_best] + 1;
                v_taken := v_taken + 1;
                v_queue_taken := v_queue_taken + 1;
                v_round := v_round + 1;
            END LOOP;
            -- the round's tenants, as the picks (and acks: p_pending) left them, held since
            -- they were read; a slot is never taken over a cap
            FOR i IN 1..v_n LOOP
                IF v_picked[i] = 0 AND v_is_mine[i] THEN
                    v_changed := v_changed + 1;
                END IF;
            END LOOP;
            UPDATE {schema}.tenants x
            SET finish_tag = d.finish_tag, start_tag = d.start_tag, usage = d.usage,
                usage_at = d.usage_at, tat = d.tat, limited_until = d.limited_until,
                head_seq = d.head_seq, ready = d.ready, running = d.running,
                succeeded = d.succeeded, kept = d.kept
            FROM unnest(v_cands) WITH ORDINALITY AS d
            JOIN unnest(v_picked, v_is_mine) WITH ORDINALITY AS p(picks, mine, ord)
              ON p.ord = d.ordinality
            WHERE x.id = d.id AND (p.picks > 0 OR p.mine)
              AND (p.picks = 0 OR x.max_running IS NULL OR d.running <= x.max_running);
            GET DIAGNOSTICS v_written = ROW_COUNT;
            IF v_written < v_changed THEN
                RAISE EXCEPTION 'fairq: a tenant of queue % refused a slot over its cap', v_queue;
            END IF;
            IF cardinality(v_mine) > 0 THEN
                v_flushed := v_flushed || v_queue;
            END IF;
            EXIT WHEN NOT v_alone;      -- beside others: one round, its tenants held (top)
            EXIT WHEN v_scanned < v_read;  -- every eligible tenant was read: none is left
        END LOOP;
        IF v_vclock IS NOT NULL THEN
            v_clocks := v_clocks || v_queue;
            v_clock_values := v_clock_values || v_vclock;
            v_clock_counts := v_clock_counts || v_queue_taken;
        END IF;
    END LOOP;
    -- the rows of p_pending no round wrote (their queue was full, or had no turn)
    UPDATE {schema}.tenants x
    SET finish_tag = d.finish_tag, start_tag = d.start_tag, usage = d.usage,
        usage_at = d.usage_at, running = d.running, succeeded = d.succeeded, kept = d.kept
    FROM unnest(p_pending) AS d
    WHERE x.id = d.id AND d.queue <> ALL(v_flushed);
    RETURN QUERY
    WITH started AS (
        UPDATE {schema}.jobs j
        SET state = 'running', attempts = j.attempts + 1, leases = j.leases + 1,
            started_at = p_now, deadline = p_now + coalesce(p_hold, j.lease_timeout),
            worker_id = p_worker, charged = c.charge, claimed = p_hold IS NULL
        FROM unnest(v_seqs, v_charges) AS c(seq, charge)
        WHERE j.seq = c.seq
        RETURNING j.seq, j.id, j.name, j.queue, j.payload, j.attempts, j.leases,
                  j.max_attempts, j.started_at, j.deadline, j.lease_timeout, j.charged,
                  j.ready_at, j.headers, j.tenant_id
    ), waited AS (  -- each job's wait, for the figures (figures.sql), in key order; the rows
                    -- of a tenant are written only by whoever holds that tenant
        INSERT INTO {schema}.figures AS f (slot, tenant_id, kind, bucket, count)
        SELECT {schema}.fig_slot(p_now), w.tenant_id, 'w',
               {schema}.fig_bucket(p_now - w.ready_at) AS bucket, count(*)
        FROM started w
        GROUP BY w.tenant_id, bucket
        ORDER BY w.tenant_id, bucket
        ON CONFLICT (slot, tenant_id, kind, bucket) DO UPDATE SET count = f.count + excluded.count
    )
    SELECT s.id, s.name, s.queue, o.tenant, s.payload, s.attempts, s.leases, s.max_attempts,
           s.started_at, s.deadline, s.lease_timeout, s.charged, s.ready_at, s.headers
    FROM unnest(v_seqs, v_names) WITH ORDINALITY AS o(seq, tenant, ord)
    JOIN started s ON s.seq = o.seq
    ORDER BY o.ord;
    -- V and the count in flight, last: a queue's row is held only while this call commits
    FOR v_k IN SELECT o.k FROM unnest(v_clocks) WITH ORDINALITY AS o(name, k) ORDER BY o.name
    LOOP
        UPDATE {schema}.queues q
        SET vclock = GREATEST(q.vclock, v_clock_values[v_k]),
            in_flight = q.in_flight
                + CASE WHEN q.max_in_flight IS NULL THEN 0 ELSE v_clock_counts[v_k] END
        WHERE q.name = v_clocks[v_k];
    END LOOP;
    IF v_taken = 0 AND cardinality(v_open) > 0 AND EXISTS (
        SELECT 1 FROM unnest(v_open) AS n
        WHERE EXISTS (SELECT 1 FROM {schema}.tenants e
                      WHERE e.queue = n AND e.start_tag IS NOT NULL)
           OR EXISTS (SELECT 1 FROM {schema}.inbox i WHERE i.queue = n)) THEN
        RETURN NEXT;  -- missed: eligible tenants, or new jobs, of tenants others held
    END IF;
END
$$;
