-- Learned job costs (fairq/policy/cost.py; docs/internals/scheduler.md, "Learned cost"): each
-- (queue, job name)'s row of job_costs, (runs, mean), the estimate a dispatch charges
-- (dispatch.sql reads it once per name per round: lock_candidates, next_head).
--
-- A queue's acks would all write the rows of its few job names: a hot row, which would make
-- the acks of a queue (and the dispatches that follow them in ack_and_dequeue) wait for each
-- other. So a call folds its samples per row in memory and writes each row once, and never
-- waits for one: a row another transaction holds is skipped (FOR UPDATE SKIP LOCKED) and that
-- call's samples of it are dropped. An estimate needs samples, not every sample; calls one
-- after another (the conformance suite) still fold every sample, so their estimates are the
-- reference model's to the bit. The one wait left is for the first row of a name: two calls
-- that both bring a name's first samples insert it, and the second waits for the first to
-- commit (then drops its own).

-- The key of a (queue, name)'s row (a queue name has no '/').
CREATE FUNCTION {schema}.cost_key(p_queue text, p_name text) RETURNS bytea
LANGUAGE sql STABLE AS $$
    SELECT sha256(convert_to(p_queue || '/' || p_name, 'UTF8'))
$$;

-- Fold p_samples[k] (a claimed run's charge, max(ended - started, MIN_CHARGE)) into the row
-- of (p_queues[k], p_names[k]), in the order given, with fairq.policy.cost.learn's expressions
-- in its order (so the doubles are the reference model's to the bit): bounded to OUTLIER (4) x
-- the mean once TRUSTED (3) samples are in, runs = min(runs + 1, WINDOW (20)),
-- mean = mean + (sample - mean) / runs, from (0, 0.0). Each (queue, name) of the call in turn
-- (a call's samples are mostly of one name): its row locked unless another transaction holds
-- it, all its samples folded, the row written once; the rows not there yet are inserted last,
-- in key order, and a row another transaction holds drops its samples. Called by the acks
-- (acks.sql: ack_held) and a reported failure (events.py), after their tenants are held.
CREATE FUNCTION {schema}.learn_costs(
    p_queues text[], p_names text[], p_samples double precision[]
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_seen text[] := ARRAY[]::text[];  -- the (queue, name)s folded so far, as queue/name
    v_new_keys bytea[] := ARRAY[]::bytea[];  -- those with no row this call could take
    v_new_queues text[] := ARRAY[]::text[];
    v_new_names text[] := ARRAY[]::text[];
    v_new_runs integer[] := ARRAY[]::integer[];
    v_new_means double precision[] := ARRAY[]::double precision[];
    v_pair text;
    v_key bytea;
    v_found boolean;
    v_runs integer;
    v_mean double precision;
    v_sample double precision;
BEGIN
    FOR i IN 1..cardinality(p_samples) LOOP
        v_pair := p_queues[i] || '/' || p_names[i];
        CONTINUE WHEN v_pair = ANY(v_seen);
        v_seen := v_seen || v_pair;
        v_key := {schema}.cost_key(p_queues[i], p_names[i]);
        SELECT c.runs, c.mean INTO v_runs, v_mean FROM {schema}.job_costs c
        WHERE c.key = v_key
        FOR UPDATE SKIP LOCKED;
        v_found := FOUND;
        IF NOT v_found THEN
            v_runs := 0;
            v_mean := 0.0;
        END IF;
        FOR k IN i..cardinality(p_samples) LOOP
            CONTINUE WHEN p_queues[k] <> p_queues[i] OR p_names[k] <> p_names[i];
            v_sample := p_samples[k];
            IF v_runs >= 3 THEN
                v_sample := LEAST(v_sample, 4.0::double precision * v_mean);
            END IF;
            v_runs := LEAST(v_runs + 1, 20);
            v_mean := v_mean + (v_sample - v_mean) / v_runs;
        END LOOP;
        IF v_found THEN
            UPDATE {schema}.job_costs c SET runs = v_runs, mean = v_mean WHERE c.key = v_key;
        ELSE
            v_new_keys := v_new_keys || v_key;
            v_new_queues := v_new_queues || p_queues[i];
            v_new_names := v_new_names || p_names[i];
            v_new_runs := v_new_runs || v_runs;
            v_new_means := v_new_means || v_mean;
        END IF;
    END LOOP;
    IF cardinality(v_new_keys) > 0 THEN  -- new rows; one another transaction holds is there
        INSERT INTO {schema}.job_costs (key, queue, name, runs, mean)
        SELECT n.key, n.queue, n.name, n.runs, n.mean
        FROM unnest(v_new_keys, v_new_queues, v_new_names, v_new_runs, v_new_means)
                 AS n(key, queue, name, runs, mean)
        WHERE NOT EXISTS (SELECT 1 FROM {schema}.job_costs c WHERE c.key = n.key)
        ORDER BY n.key
        ON CONFLICT (key) DO NOTHING;
    END IF;
END
$$;
