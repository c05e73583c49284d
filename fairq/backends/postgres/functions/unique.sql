-- Unique keys at enqueue (fairq/policy/unique.py, docs/unique.md), server-side.
--
-- unique_claim judges, job after job of a batch, whose key is held, and lets the others take
-- their keys, in the enqueue's transaction; the caller then stores the jobs not held, in the
-- same transaction (so a key names a job of that batch until it commits, or neither exists).
--
-- Of concurrent enqueues with one key exactly one takes it. A free key is taken by inserting
-- its row: a second insert of the digest waits for the first transaction, then finds its row.
-- A key already there is locked (FOR UPDATE) before it is judged, and judged by statements of
-- their own: in READ COMMITTED each takes a new snapshot, so it sees the job that the
-- transaction which took the key committed with it. The keys are visited in digest order
-- (then batch order), so two batches sharing keys lock them in one order. A key deleted by
-- maintenance between the insert and the lock is inserted again.
--
-- A job is pending while it is in jobs and not dead (scheduled, ready or running: succeeded
-- jobs are in succeeded_jobs), or waits in the inbox (enqueued in a caller's transaction,
-- not yet taken in); a key taken earlier in the call names a job of the batch.
--
-- Returns the jobs whose key is held: their position in the batch (1-based) and the id and
-- queue of the job holding it.
CREATE FUNCTION {schema}.unique_claim(
    p_queues text[], p_tenants text[], p_keys text[], p_ids text[], p_job_queues text[],
    p_windows double precision[], p_holds boolean[], p_now double precision
) RETURNS TABLE (pos integer, held_by text, held_queue text)
LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision := {schema}.event_time(p_now);
    v_taken text[] := ARRAY[]::text[];   -- ids of the batch that took a key in this call
    v_job record;
    v_key record;
    v_pending boolean;
BEGIN
    FOR v_job IN
        SELECT o.i, o.q, o.t, o.k, o.id, o.jq, o.w, o.h,
               sha256(convert_to(length(o.q) || ':' || o.q || length(o.t) || ':' || o.t || o.k,
                                 'UTF8')) AS digest
        FROM unnest(p_queues, p_tenants, p_keys, p_ids, p_job_queues, p_windows, p_holds)
             WITH ORDINALITY AS o(q, t, k, id, jq, w, h, i)
        ORDER BY digest, o.i
    LOOP
        LOOP
            INSERT INTO {schema}.unique_keys
                (digest, queue, tenant, key, job_id, job_queue, expires_at, hold)
            VALUES (v_job.digest, v_job.q, v_job.t, v_job.k, v_job.id, v_job.jq,
                    v_now + v_job.w, v_job.h)
            ON CONFLICT (digest) DO NOTHING;
            IF FOUND THEN  -- the key was free
                v_taken := v_taken || v_job.id;
                EXIT;
            END IF;
            SELECT u.job_id, u.job_queue, u.expires_at, u.hold INTO v_key
            FROM {schema}.unique_keys u WHERE u.digest = v_job.digest FOR UPDATE;
            CONTINUE WHEN NOT FOUND;  -- pruned meanwhile: insert again
            v_pending := v_key.job_id = ANY(v_taken)
                OR EXISTS (SELECT 1 FROM {schema}.jobs j
                           WHERE j.id = v_key.job_id AND j.state <> 'dead')
                OR EXISTS (SELECT 1 FROM {schema}.inbox b WHERE b.id = v_key.job_id);
            IF v_now < v_key.expires_at AND (v_key.hold OR v_pending) THEN
                pos := v_job.i;
                held_by := v_key.job_id;
                held_queue := v_key.job_queue;
                RETURN NEXT;
            ELSE
                UPDATE {schema}.unique_keys
                SET job_id = v_job.id, job_queue = v_job.jq, expires_at = v_now + v_job.w,
                    hold = v_job.h
                WHERE digest = v_job.digest;
                v_taken := v_taken || v_job.id;
            END IF;
            EXIT;
        END LOOP;
    END LOOP;
END
$$;

-- Maintenance: delete up to p_limit keys whose window ended (through unique_keys_expiry);
-- returns how many. A key locked by an enqueue (judging it, or in a caller's transaction not
-- yet committed) is skipped, never waited for: the next pass takes it.
CREATE FUNCTION {schema}.unique_prune(p_now double precision, p_limit integer)
RETURNS bigint LANGUAGE sql AS $$
    WITH gone AS (
        DELETE FROM {schema}.unique_keys
        WHERE digest = ANY(ARRAY(SELECT u.digest FROM {schema}.unique_keys u
                                 WHERE u.expires_at <= p_now
                                 ORDER BY u.expires_at
                                 LIMIT p_limit
                                 FOR UPDATE SKIP LOCKED))
        RETURNING 1
    )
    SELECT count(*) FROM gone
$$;
