-- Named queries of throttle windows (throttling.py).
-- {schema} is replaced by the quoted schema name; queries/locks.sql gives the lock order.

-- name: throttle_windows_ensure
-- Record + decide, step 1: a row for every (job name, tenant) of the enqueue, created in key
-- order (so concurrent enqueues never wait in a cycle) and then locked by throttle_windows_lock.
-- These row locks are taken before any queue lock: maintenance never waits for them (its
-- prune skips locked rows), so the order stays free of cycles.
INSERT INTO {schema}.throttle_windows (key, name, tenant, times, span, last_at, expires_at)
SELECT n.key, n.name, n.tenant, '{}', 0.0, '-Infinity', '-Infinity'
FROM unnest(%(keys)s::bytea[], %(names)s::text[], %(tenants)s::text[])
         WITH ORDINALITY AS n(key, name, tenant, ord)
ORDER BY n.ord
ON CONFLICT (key) DO NOTHING

-- name: throttle_windows_lock
SELECT key, name, tenant, times, span FROM {schema}.throttle_windows
WHERE key = ANY(%(keys)s::bytea[])
ORDER BY key
FOR UPDATE

-- name: throttle_window_save
-- times holds at most max threshold + 1 values (fairq/policy/throttle.py: window_size).
UPDATE {schema}.throttle_windows
SET times = %(times)s::double precision[], span = %(span)s, last_at = %(last_at)s,
    expires_at = %(last_at)s::double precision + %(span)s::double precision
WHERE key = %(key)s

-- name: throttle_windows_get
SELECT key, name, tenant, times, span FROM {schema}.throttle_windows
WHERE key = ANY(%(keys)s::bytea[])

-- name: throttle_windows_prune
-- Windows whose every time is older than their span: they can match no rule any more. Rows an
-- enqueue holds are skipped (never waited for), so a prune never deadlocks with an enqueue.
DELETE FROM {schema}.throttle_windows
WHERE key IN (SELECT w.key FROM {schema}.throttle_windows w
              WHERE w.expires_at < %(now)s
                AND w.last_at < %(now)s::double precision - w.span
              ORDER BY w.expires_at
              LIMIT %(limit)s
              FOR UPDATE SKIP LOCKED)
