-- Hands out up to p_limit head jobs, each of the eligible tenant with the smallest
-- (start_tag, head_seq), trying p_queues in order. The caller holds the queues' exclusive
-- locks: no other transaction writes these tenants or their ready jobs meanwhile, so the
-- rows need no row locks (and SKIP LOCKED would skip the order we must keep). The arithmetic
-- is fairness.finish_after_dispatch, history.add_usage and rate.after_start / limited_until,
-- in their order, pick after pick; V = S of the last pick of each queue.
--
-- Set-wise (schema 8): a round reads the k smallest eligible tenants of a queue (k = what is
-- left to hand out, at most 64) with their head jobs, and makes up to k picks among them in
-- memory. That is exact: a tenant not read has a key at or above the k-th one read, and while
-- fewer than k picks are made, some tenant read is still unpicked, with a key at or below it.
-- A pick reads only its tenant's next head (one index probe); the round writes the tenants it
-- changed in one UPDATE, and the call starts all its jobs in one UPDATE at the end.
-- A head job is read by its key alone, and no statement here may scan a table: a plan cached
-- while the tables were tiny must still be a key lookup once they are large.
--
-- A queue with a cap on its leased jobs (max_in_flight) hands out at most its room,
-- max_in_flight - in_flight, and adds what it handed out to in_flight: a round then reads at
-- most the room's worth of tenants (exact as above, k being the room), and a full queue reads
-- none and the next queue is tried. Who is picked is decided as without the cap. The count is a
-- column, read under the queue lock this function runs under, not a count of the running jobs:
-- counting would walk the dead entries acked jobs leave in jobs_running until vacuum, under
-- the lock that serialises the queue's dispatches.
CREATE FUNCTION {schema}.dispatch(
    p_queues text[], p_worker text, p_now double precision, p_limit integer
) RETURNS TABLE (
    l_id text, l_name text, l_queue text, l_tenant text, l_payload text, l_attempts integer,
    l_leases integer, l_max_attempts integer, l_started_at double precision,
    l_deadline double precision, l_lease_timeout double precision, l_cost double precision,
    l_ready_at double precision, l_headers text
) LANGUAGE plpgsql AS $$
DECLARE
    v_cands {schema}.tenants[];  -- the round's tenants, changed in memory pick by pick
    v_prios integer[];            -- each one's head job: its priority and cost
    v_costs double precision[];
    v_picked integer[];           -- picks per tenant in this round
    v_starts double precision[];  -- their keys (start_tag, head_seq), for the picks
    v_heads bigint[];
    v_seqs bigint[] := ARRAY[]::bigint[];  -- the jobs handed out, in order
    v_names text[] := ARRAY[]::text[];     -- and their tenants
    t {schema}.tenants%ROWTYPE;
    v_queue text;
    v_half_life double precision;
    v_room bigint;                -- what the queue may hand out under its cap; NULL: no cap
    v_queue_taken integer;        -- handed out from this queue
    v_vclock double precision;
    v_want integer;
    v_n integer;
    v_best integer;
    v_round integer;
    v_next bigint;
    v_next_prio integer;
    v_next_cost double precision;
    v_finish double precision;
    v_interval double precision;
    v_until double precision;
    v_taken integer := 0;
    v_changed integer;            -- tenants picked in this round
    v_written integer;
BEGIN
    FOREACH v_queue IN ARRAY p_queues LOOP
        v_vclock := NULL;
        v_queue_taken := 0;
        SELECT coalesce(q.half_life, 60.0::double precision), q.max_in_flight - q.in_flight
        INTO v_half_life, v_room
        FROM {schema}.queues q WHERE q.name = v_queue;
        WHILE v_taken < p_limit LOOP
            v_want := LEAST(p_limit - v_taken, 64, coalesce(v_room - v_queue_taken, 64));
            EXIT WHEN v_want <= 0;  -- full: the next queue is tried
            SELECT array_agg(c.x ORDER BY c.ord), array_agg(c.priority ORDER BY c.ord),
                   array_agg(c.cost ORDER BY c.ord), array_agg(c.start_tag ORDER BY c.ord),
                   array_agg(c.head_seq ORDER BY c.ord)
            INTO v_cands, v_prios, v_costs, v_starts, v_heads
            FROM (SELECT x, CASE WHEN h.state = 'ready' THEN h.priority END AS priority,
                         h.cost, x.start_tag, x.head_seq,
                         row_number() OVER (ORDER BY x.start_tag, x.head_seq) AS ord
                  FROM {schema}.tenants x
                  -- OFFSET 0: the head read by its key alone (without the fence, 1,095
                  -- buffers once in six runs of tests/postgres/test_cached_plans.py)
                  LEFT JOIN LATERAL (
                      SELECT j.priority, j.cost, j.state FROM {schema}.jobs j
                      WHERE j.seq = x.head_seq OFFSET 0) h ON true
                  WHERE x.queue = v_queue AND x.start_tag IS NOT NULL
                  ORDER BY x.start_tag, x.head_seq
                  LIMIT v_want) c;
            EXIT WHEN v_cands IS NULL;
            v_n := cardinality(v_cands);
            IF array_position(v_prios, NULL) IS NOT NULL THEN
                RAISE EXCEPTION 'fairq: an eligible tenant''s head job in % is not ready', v_queue;
            END IF;
            v_picked := array_fill(0, ARRAY[v_n]);
            v_changed := 0;
            v_round := 0;
            -- at most v_n picks while tenants were left unread (see above)
            WHILE v_taken < p_limit AND (v_n < v_want OR v_round < v_n)
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
                SELECT r.seq, r.priority, r.cost INTO v_next, v_next_prio, v_next_cost
                FROM {schema}.jobs r
                WHERE r.tenant_id = t.id AND r.state = 'ready'
                  AND r.priority = v_prios[v_best] AND r.seq > t.head_seq
                ORDER BY r.priority DESC, r.seq
                LIMIT 1;
                IF v_next IS NULL THEN
                    SELECT r.seq, r.priority, r.cost INTO v_next, v_next_prio, v_next_cost
                    FROM {schema}.jobs r
                    WHERE r.tenant_id = t.id AND r.state = 'ready'
                      AND r.priority < v_prios[v_best]
                    ORDER BY r.priority DESC, r.seq
                    LIMIT 1;
                END IF;
                -- V = S; F = S + estimate / w
                v_vclock := t.start_tag;
                v_finish := t.start_tag + v_costs[v_best] / t.weight;
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
                IF v_picked[v_best] = 0 THEN
                    v_changed := v_changed + 1;
                END IF;
                v_picked[v_best] := v_picked[v_best] + 1;
                v_taken := v_taken + 1;
                v_queue_taken := v_queue_taken + 1;
                v_round := v_round + 1;
            END LOOP;
            -- the round's tenants, as the picks left them; a slot is never taken over a cap
            UPDATE {schema}.tenants x
            SET finish_tag = d.finish_tag, start_tag = d.start_tag, usage = d.usage,
                usage_at = d.usage_at, tat = d.tat, limited_until = d.limited_until,
                head_seq = d.head_seq, ready = x.ready - p.picks, running = x.running + p.picks
            FROM unnest(v_cands) WITH ORDINALITY AS d
            JOIN unnest(v_picked) WITH ORDINALITY AS p(picks, ord) ON p.ord = d.ordinality
            WHERE x.id = d.id AND p.picks > 0
              AND (x.max_running IS NULL OR x.running + p.picks <= x.max_running);
            GET DIAGNOSTICS v_written = ROW_COUNT;
            IF v_written < v_changed THEN
                RAISE EXCEPTION 'fairq: a tenant of queue % refused a slot over its cap', v_queue;
            END IF;
            EXIT WHEN v_n < v_want;  -- every eligible tenant was read: none is left
        END LOOP;
        IF v_vclock IS NOT NULL THEN
            UPDATE {schema}.queues
            SET vclock = v_vclock,
                in_flight = in_flight + CASE WHEN max_in_flight IS NULL THEN 0
                                             ELSE v_queue_taken END
            WHERE name = v_queue;
        END IF;
    END LOOP;
    RETURN QUERY
    WITH started AS (
        UPDATE {schema}.jobs j
        SET state = 'running', attempts = j.attempts + 1, leases = j.leases + 1,
            started_at = p_now, deadline = p_now + j.lease_timeout, worker_id = p_worker,
            charged = j.cost
        WHERE j.seq = ANY(v_seqs)
        RETURNING j.seq, j.id, j.name, j.queue, j.payload, j.attempts, j.leases,
                  j.max_attempts, j.started_at, j.deadline, j.lease_timeout, j.cost,
                  j.ready_at, j.headers, j.tenant_id
    ), counted AS (  -- each job's wait, for the figures (figures.sql)
        SELECT {schema}.fig_slot(p_now) AS slot, w.tenant_id,
               {schema}.fig_bucket(p_now - w.ready_at) AS bucket, count(*) AS n
        FROM started w
        GROUP BY w.tenant_id, bucket
    ), bumped AS (  -- counts already there: updated in place (no other writer of waits
                    -- runs meanwhile: they are written under this queue's exclusive lock)
        UPDATE {schema}.figures f SET count = f.count + c.n
        FROM counted c
        WHERE f.slot = c.slot AND f.tenant_id = c.tenant_id AND f.kind = 'w'
          AND f.bucket = c.bucket
        RETURNING f.tenant_id, f.bucket
    ), waited AS (  -- the others inserted
        INSERT INTO {schema}.figures (slot, tenant_id, kind, bucket, count)
        SELECT c.slot, c.tenant_id, 'w', c.bucket, c.n
        FROM counted c
        WHERE NOT EXISTS (SELECT 1 FROM bumped b
                          WHERE b.tenant_id = c.tenant_id AND b.bucket = c.bucket)
    )
    SELECT s.id, s.name, s.queue, o.tenant, s.payload, s.attempts, s.leases, s.max_attempts,
           s.started_at, s.deadline, s.lease_timeout, s.cost, s.ready_at, s.headers
    FROM unnest(v_seqs, v_names) WITH ORDINALITY AS o(seq, tenant, ord)
    JOIN started s ON s.seq = o.seq
    ORDER BY o.ord;
END
$$;
