-- Learned job costs (fairq/policy/cost.py; docs/internals/scheduler.md, "Learned cost"): each
-- (queue, job name)'s row of job_costs, (runs, mean), the estimate a dispatch charges
-- (dispatch.sql reads it once per name per call).
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
-- of (p_queues[k], p_names[k]), in the order given, with fairq.policy.cost.learn's
-- expressions in its order: bounded to OUTLIER (4) x the mean once TRUSTED (3) samples are in,
-- runs = min(runs + 1, WINDOW (20)), mean = mean + (sample - mean) / runs, from (0, 0.0).
-- Called by the acks (acks.sql: ack_held) and a reported failure (events.py), after the
-- tenants are held: the rows come last in every order of locks (queries.sql).
CREATE FUNCTION {schema}.learn_costs(
    p_queues text[], p_names text[], p_samples double precision[]
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_of bytea[];                 -- each sample's row key
    v_keys bytea[];               -- the rows, each once, in key order
    v_queues text[];
    v_names text[];
    v_runs integer[];             -- each row as the samples leave it
    v_means double precision[];
    v_held boolean[];             -- locked here: stored; else new, or held by another
    v_sample double precision;
    v_n integer;
    i integer;
    r record;
BEGIN
    v_of := ARRAY(SELECT {schema}.cost_key(s.queue, s.name)
                  FROM unnest(p_queues, p_names) WITH ORDINALITY AS s(queue, name, ord)
                  ORDER BY s.ord);
    SELECT array_agg(d.key ORDER BY d.key), array_agg(d.queue ORDER BY d.key),
           array_agg(d.name ORDER BY d.key)
    INTO v_keys, v_queues, v_names
    FROM (SELECT DISTINCT ON (k.key) k.key, k.queue, k.name
          FROM unnest(v_of, p_queues, p_names) AS k(key, queue, name)
          ORDER BY k.key) d;
    v_n := cardinality(v_keys);
    v_runs := array_fill(0, ARRAY[v_n]);
    v_means := array_fill(0.0::double precision, ARRAY[v_n]);
    v_held := array_fill(false, ARRAY[v_n]);
    FOR r IN
        SELECT c.key, c.runs, c.mean FROM {schema}.job_costs c
        WHERE c.key = ANY(v_keys)
        ORDER BY c.key
        FOR UPDATE SKIP LOCKED
    LOOP
        i := array_position(v_keys, r.key);
        v_runs[i] := r.runs;
        v_means[i] := r.mean;
        v_held[i] := true;
    END LOOP;
    FOR k IN 1..cardinality(p_samples) LOOP
        i := array_position(v_keys, v_of[k]);
        v_sample := p_samples[k];
        IF v_runs[i] >= 3 THEN
            v_sample := LEAST(v_sample, 4.0::double precision * v_means[i]);
        END IF;
        v_runs[i] := LEAST(v_runs[i] + 1, 20);
        v_means[i] := v_means[i] + (v_sample - v_means[i]) / v_runs[i];
    END LOOP;
    IF true = ANY(v_held) THEN
        UPDATE {schema}.job_costs c SET runs = d.runs, mean = d.mean
        FROM unnest(v_keys, v_runs, v_means, v_held) AS d(key, runs, mean, held)
        WHERE d.held AND c.key = d.key;
    END IF;
    IF false = ANY(v_held) THEN  -- new rows; one held by another is there: dropped
        INSERT INTO {schema}.job_costs (key, queue, name, runs, mean)
        SELECT d.key, d.queue, d.name, d.runs, d.mean
        FROM unnest(v_keys, v_queues, v_names, v_runs, v_means, v_held)
                 AS d(key, queue, name, runs, mean, held)
        WHERE NOT d.held
          AND NOT EXISTS (SELECT 1 FROM {schema}.job_costs c WHERE c.key = d.key)
        ORDER BY d.key
        ON CONFLICT (key) DO NOTHING;
    END IF;
END
$$;
