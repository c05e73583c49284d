-- Named queries of slots (slots.py).
-- {schema} is replaced by the quoted schema name; queries/locks.sql gives the lock order.

-- name: slots_lock
-- Tenant slots: acquire, renew and release of a (queue, tenant) take turns on an advisory lock
-- of its own (slots.py: lock_key), all of a call's in key order, before any slot row: a count
-- and the insert after it are then one step, and a renew racing an acquire is ordered with
-- it. Returns the event's time once the locks are held (functions/clock.sql).
SELECT {schema}.event_time(%(now)s) AS now
FROM (SELECT count(*) FROM (
          SELECT pg_advisory_xact_lock(k)
          FROM (SELECT DISTINCT unnest(%(keys)s::bigint[]) AS k) s
          ORDER BY k) locks) locked

-- name: slot_acquire
-- Under the (queue, tenant)'s lock (slots_lock, an earlier statement, so this one's snapshot
-- sees every slot taken before): drop its expired slots, count the rest, and take one when
-- fewer than the cap are held. The cap: %(limit)s, else the tenant row's effective
-- max_running, else the queue's default, else none. Returns the new slot's deadline (NULL:
-- refused) and the earliest deadline held.
WITH expired AS (
    DELETE FROM {schema}.slots
    WHERE queue = %(queue)s AND tenant_key = %(key)s AND deadline <= %(now)s
),
held AS (
    SELECT count(*) AS held, min(deadline) AS free_at FROM {schema}.slots
    WHERE queue = %(queue)s AND tenant_key = %(key)s AND tenant = %(tenant)s
      AND deadline > %(now)s
),
setting AS (
    SELECT coalesce(%(limit)s::integer, (
        SELECT s.max_running FROM (
            SELECT t.max_running, 1 AS own FROM {schema}.tenants t
            WHERE t.queue = %(queue)s AND t.tenant_key = %(key)s AND t.tenant = %(tenant)s
            UNION ALL
            SELECT q.max_running, 0 AS own FROM {schema}.queues q WHERE q.name = %(queue)s
            ORDER BY own DESC LIMIT 1) s)) AS cap
),
taken AS (
    INSERT INTO {schema}.slots (nonce, queue, tenant, tenant_key, holder, lease, deadline)
    SELECT %(nonce)s, %(queue)s, %(tenant)s, %(key)s, %(holder)s, %(lease)s,
           %(now)s::double precision + %(lease)s::double precision
    FROM held, setting
    WHERE setting.cap IS NULL OR held.held < setting.cap
    RETURNING deadline
)
SELECT (SELECT deadline FROM taken) AS deadline, held.free_at FROM held

-- name: slots_get
-- The slots of a renew or release (their (queue, tenant) locks held), locked.
SELECT nonce, queue, tenant, lease, deadline FROM {schema}.slots
WHERE nonce = ANY(%(nonces)s::text[])
ORDER BY nonce
FOR UPDATE

-- name: slots_renew
UPDATE {schema}.slots s SET deadline = n.deadline
FROM unnest(%(nonces)s::text[], %(deadlines)s::double precision[]) AS n(nonce, deadline)
WHERE s.nonce = n.nonce

-- name: slots_delete
DELETE FROM {schema}.slots WHERE nonce = ANY(%(nonces)s::text[])

-- name: waiter_get
-- Under the (queue, tenant)'s lock (slots_lock), as every statement on slot_waiters.
SELECT place FROM {schema}.slot_waiters
WHERE place = %(place)s AND queue = %(queue)s AND tenant = %(tenant)s

-- name: waiter_park
-- Park a job refused a slot, or park a copy again: wakeable, its place in line kept.
INSERT INTO {schema}.slot_waiters (place, queue, tenant, tenant_key, since, park, woken, touched)
VALUES (%(place)s, %(queue)s, %(tenant)s, %(key)s, %(now)s, %(park)s, false, %(now)s)
ON CONFLICT (place) DO UPDATE SET park = excluded.park, woken = false, touched = excluded.touched

-- name: waiter_delete
DELETE FROM {schema}.slot_waiters WHERE place = %(place)s

-- name: waiter_leave
-- A parked job whose timed copy was not sent leaves its line (none of its copies may run).
DELETE FROM {schema}.slot_waiters
WHERE place = %(place)s AND queue = %(queue)s AND tenant = %(tenant)s

-- name: waiter_wake
-- A release hands out the oldest wakeable parked job of its (queue, tenant) (slot_waiters_line).
UPDATE {schema}.slot_waiters SET woken = true, touched = %(now)s
WHERE place = (SELECT place FROM {schema}.slot_waiters
               WHERE queue = %(queue)s AND tenant_key = %(key)s AND tenant = %(tenant)s
                 AND NOT woken
               ORDER BY since, place LIMIT 1)
RETURNING place, park

-- name: waiters_prune
-- Maintenance: lines nobody came back to for PARK_TTL (a timed copy touches its row).
DELETE FROM {schema}.slot_waiters WHERE touched <= %(before)s

-- name: slots_prune
-- Maintenance: expired slots, found through slots_deadline; rows another call holds are
-- skipped (never waited for), the rest go next time.
DELETE FROM {schema}.slots
WHERE nonce = ANY(ARRAY(SELECT s.nonce FROM {schema}.slots s
                        WHERE s.deadline <= %(now)s
                        ORDER BY s.deadline
                        LIMIT %(limit)s
                        FOR UPDATE SKIP LOCKED))
