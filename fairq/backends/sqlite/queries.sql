-- Named queries of the SQLite backend. Each block runs inside a transaction opened by
-- fairq/backends/sqlite/db.py. Job states are literals, never parameters, so that the
-- partial indexes (WHERE state = '…') apply; tests/sqlite/test_query_plans.py checks that no
-- query on the enqueue/dequeue/ack/maintain paths scans jobs or tenants.

-- name: meta_get
SELECT value FROM fairq_meta WHERE key = :key

-- name: meta_set
INSERT INTO fairq_meta (key, value) VALUES (:key, :value)
ON CONFLICT (key) DO UPDATE SET value = excluded.value

-- name: queue_get
SELECT * FROM queues WHERE name = :name

-- name: queue_ensure
INSERT INTO queues (name) VALUES (:name) ON CONFLICT (name) DO NOTHING

-- name: queue_set_defaults
INSERT INTO queues (
    name, weight, max_running, rate_count, rate_period, rate_burst, half_life, max_debt,
    max_in_flight
) VALUES (
    :name, :weight, :max_running, :rate_count, :rate_period, :rate_burst, :half_life, :max_debt,
    :max_in_flight
)
ON CONFLICT (name) DO UPDATE SET
    weight = excluded.weight, max_running = excluded.max_running,
    rate_count = excluded.rate_count, rate_period = excluded.rate_period,
    rate_burst = excluded.rate_burst, half_life = excluded.half_life,
    max_debt = excluded.max_debt, max_in_flight = excluded.max_in_flight

-- name: queue_in_flight
-- A capped queue's leased jobs, counted when it dispatches: a range of jobs_running that stops
-- at the cap (a queue at or over its cap is full, however far over).
SELECT count(*) AS n FROM (
    SELECT 1 FROM jobs WHERE queue = :queue AND state = 'running' LIMIT :cap
)

-- name: queue_set_vclock
UPDATE queues SET vclock = :vclock WHERE name = :name

-- name: queue_names
SELECT name FROM queues ORDER BY name

-- name: tenant_ensure
-- A new tenant starts with the queue's defaults as its effective settings.
INSERT INTO tenants (queue, tenant, weight, max_running, rate_count, rate_period, rate_burst)
SELECT name, :tenant, weight, max_running, rate_count, rate_period, rate_burst
FROM queues WHERE name = :queue
ON CONFLICT (queue, tenant) DO NOTHING

-- name: shard_load
-- A candidate shard of a sharded job, as fairq.policy.shards.least_loaded weighs it: its
-- other eligible tenants (a range of tenants_eligible, counted up to :most) and the tenant's
-- own ready jobs there.
SELECT (SELECT count(*) FROM (SELECT 1 FROM tenants
        WHERE queue = :queue AND start_tag IS NOT NULL AND tenant <> :tenant
        LIMIT :most)) AS others,
       coalesce((SELECT ready FROM tenants WHERE queue = :queue AND tenant = :tenant), 0) AS ready

-- name: tenant_id
SELECT id FROM tenants WHERE queue = :queue AND tenant = :tenant

-- name: tenant_get
SELECT * FROM tenants WHERE id = :id

-- name: tenant_save
UPDATE tenants SET
    own_weight = :own_weight, own_max_running = :own_max_running,
    own_rate_count = :own_rate_count, own_rate_period = :own_rate_period,
    own_rate_burst = :own_rate_burst,
    weight = :weight, max_running = :max_running,
    rate_count = :rate_count, rate_period = :rate_period, rate_burst = :rate_burst,
    tat = :tat, limited_until = :limited_until, usage = :usage, usage_at = :usage_at,
    finish_tag = :finish_tag, start_tag = :start_tag, head_seq = :head_seq,
    ready = :ready, scheduled = :scheduled, running = :running,
    succeeded = :succeeded, failed = :failed, dead = :dead, kept = :kept,
    cancelled = :cancelled
WHERE id = :id

-- name: tenant_delete
-- Pruning forgets a tenant with nothing stored (fairq.policy.tenant.forgettable).
DELETE FROM tenants WHERE id = :id

-- name: tenant_pick
-- The eligible tenant with the smallest (start tag, head seq): one entry of tenants_eligible.
SELECT id FROM tenants
WHERE queue = :queue AND start_tag IS NOT NULL
ORDER BY start_tag, head_seq
LIMIT 1

-- name: tenant_head
-- A tenant's ready FIFO head: higher priority first, then enqueue order.
SELECT seq FROM jobs
WHERE tenant_id = :tenant_id AND state = 'ready'
ORDER BY priority DESC, seq
LIMIT 1

-- name: tenants_of_queue
-- Every tenant of a queue, to resettle after its defaults changed (admin path: set_queue).
SELECT id FROM tenants WHERE queue = :queue ORDER BY id

-- name: tenants_unlimit
-- Tenants whose rate limit is over, in (limited_until, tenant) order: a range of
-- tenants_limited that stops at the first limit still running.
SELECT id FROM tenants
WHERE queue = :queue AND limited_until IS NOT NULL AND limited_until <= :now
ORDER BY limited_until, tenant

-- name: next_limited
SELECT MIN(limited_until) AS due FROM tenants
WHERE queue = :queue AND limited_until IS NOT NULL

-- name: tenants_stats
-- Inspection, not a hot path: may scan tenants when no queue is given.
SELECT * FROM tenants
WHERE (:queue IS NULL OR queue = :queue) AND (:tenant IS NULL OR tenant = :tenant)

-- name: tenant_oldest_ready
-- Inspection, not a hot path: reads every ready job of one tenant through jobs_ready.
SELECT MIN(ready_at) AS oldest FROM jobs WHERE tenant_id = :tenant_id AND state = 'ready'

-- name: tenants_oldest_ready
-- Inspection of many tenants at once (a queue's, or all): one pass over the ready jobs
-- instead of one query per tenant.
SELECT tenant_id, MIN(ready_at) AS oldest FROM jobs
WHERE state = 'ready' AND (:queue IS NULL OR queue = :queue)
GROUP BY tenant_id

-- name: job_insert
INSERT INTO jobs (
    id, tenant_id, queue, name, state, payload, priority, max_attempts, lease_timeout, cost,
    learn_cost, enqueued_at, run_at, ready_at, headers
) VALUES (
    :id, :tenant_id, :queue, :name, :state, :payload, :priority, :max_attempts, :lease_timeout,
    :cost, :learn_cost, :enqueued_at, :run_at, :ready_at, :headers
)

-- name: job_by_seq
SELECT jobs.*, tenants.tenant AS tenant
FROM jobs JOIN tenants ON tenants.id = jobs.tenant_id
WHERE jobs.seq = :seq

-- name: job_by_id
SELECT jobs.*, tenants.tenant AS tenant
FROM jobs JOIN tenants ON tenants.id = jobs.tenant_id
WHERE jobs.id = :id

-- name: job_save
UPDATE jobs SET
    state = :state, attempts = :attempts, leases = :leases, charged = :charged,
    run_at = :run_at, ready_at = :ready_at,
    started_at = :started_at, deadline = :deadline, finished_at = :finished_at,
    last_error = :last_error, worker_id = :worker_id, claimed = :claimed
WHERE seq = :seq

-- name: job_checkpoint
UPDATE jobs SET progress = :progress WHERE seq = :seq

-- name: job_keep_result
-- An ack keeps the job's return value until :result_until (fairq/results.py).
UPDATE jobs SET result = :result, result_until = :result_until WHERE seq = :seq

-- name: job_request_cancel
-- A running job is asked to stop (fairq/cancel.py); its heartbeat reports it.
UPDATE jobs SET cancel_requested = 1 WHERE seq = :seq

-- name: jobs_due
-- Scheduled jobs whose time has come, in promotion order.
SELECT seq FROM jobs
WHERE queue = :queue AND state = 'scheduled' AND run_at <= :now
ORDER BY run_at, seq

-- name: jobs_expired
-- Running jobs whose lease has run out, in expiry order.
SELECT seq FROM jobs
WHERE queue = :queue AND state = 'running' AND deadline <= :now
ORDER BY deadline, seq

-- name: next_run_at
SELECT MIN(run_at) AS due FROM jobs WHERE queue = :queue AND state = 'scheduled'

-- name: next_deadline
SELECT MIN(deadline) AS due FROM jobs WHERE queue = :queue AND state = 'running'

-- name: jobs_prune
-- Counters are totals kept in tenants, so deleting old rows changes no figure; the tenants of
-- the deleted rows are returned to count down their kept succeeded jobs. Jobs that keep a
-- result are not in jobs_succeeded: they go when it expires (results_prune).
DELETE FROM jobs WHERE state = 'succeeded' AND result_until IS NULL AND finished_at < :before
RETURNING tenant_id

-- name: cancelled_prune
-- Cancelled jobs, pruned after the retention as succeeded ones are, through jobs_cancelled.
DELETE FROM jobs WHERE state = 'cancelled' AND finished_at < :before
RETURNING tenant_id

-- name: results_prune
-- Succeeded jobs whose kept result expired, through jobs_results, whatever the retention.
DELETE FROM jobs WHERE result_until IS NOT NULL AND result_until <= :now
RETURNING tenant_id

-- name: jobs_dead
-- Inspection, not a hot path: walks dead jobs in order of death, filtering as it goes.
SELECT jobs.*, tenants.tenant AS tenant
FROM jobs INDEXED BY jobs_dead JOIN tenants ON tenants.id = jobs.tenant_id
WHERE jobs.state = 'dead'
  AND (:queue IS NULL OR jobs.queue = :queue)
  AND (:tenant IS NULL OR tenants.tenant = :tenant)
ORDER BY jobs.finished_at, jobs.seq
LIMIT :limit

-- name: job_type_save
INSERT INTO job_types (
    name, queue, tenant_arg, params, max_attempts, lease_timeout, cost, throttle, signature,
    learn_cost
) VALUES (
    :name, :queue, :tenant_arg, :params, :max_attempts, :lease_timeout, :cost, :throttle,
    :signature, :learn_cost
)
ON CONFLICT (name) DO UPDATE SET
    queue = excluded.queue, tenant_arg = excluded.tenant_arg, params = excluded.params,
    max_attempts = excluded.max_attempts, lease_timeout = excluded.lease_timeout,
    cost = excluded.cost, throttle = excluded.throttle, signature = excluded.signature,
    learn_cost = excluded.learn_cost

-- name: job_cost_get
-- A (queue, job name)'s learned cost (fairq/backends/sqlite/costs.py): its primary key.
SELECT runs, mean FROM job_costs WHERE queue = :queue AND name = :name

-- name: job_cost_put
INSERT INTO job_costs (queue, name, runs, mean) VALUES (:queue, :name, :runs, :mean)
ON CONFLICT (queue, name) DO UPDATE SET runs = excluded.runs, mean = excluded.mean

-- name: job_costs_read
-- Inspection: every learned cost (of one queue), in (queue, name) order.
SELECT queue, name, runs, mean FROM job_costs
WHERE :queue IS NULL OR queue = :queue
ORDER BY queue, name

-- name: throttle_window
-- One (job name, tenant) window in recording order: at most its window size of rows.
SELECT id, at, span FROM throttle_times
WHERE name = :name AND tenant = :tenant
ORDER BY id

-- name: throttle_drop
DELETE FROM throttle_times WHERE id = :id

-- name: throttle_record
INSERT INTO throttle_times (name, tenant, at, span, last_at, expires_at)
VALUES (:name, :tenant, :at, 0.0, :at, :at)

-- name: throttle_stamp
-- After a recording: the window's rows carry its span and newest time (at most window size
-- rows, found through throttle_times_key).
UPDATE throttle_times SET span = :span, last_at = :last_at, expires_at = :last_at + :span
WHERE name = :name AND tenant = :tenant

-- name: throttle_prune
-- Windows whose every time is older than their span (last_at < now - span): no rule can
-- count them. Found through throttle_times_expiry; a window at the rounding edge of
-- last_at + span simply waits for the next pass.
DELETE FROM throttle_times WHERE expires_at < :now AND last_at < :now - span

-- name: slots_drop_expired
-- An acquire first drops its (queue, tenant)'s expired slots (slots_place).
DELETE FROM slots WHERE queue = :queue AND tenant = :tenant AND deadline <= :now

-- name: slots_held
-- The slots a (queue, tenant) holds (expired ones already dropped) and the first to end.
SELECT count(*) AS held, min(deadline) AS free_at FROM slots
WHERE queue = :queue AND tenant = :tenant

-- name: slot_setting
-- The tenant's effective max_running in the queue: its row's when it has one (own setting,
-- else the queue's default, kept current by set_queue), else the queue's default.
SELECT EXISTS (SELECT 1 FROM tenants WHERE queue = :queue AND tenant = :tenant) AS known,
       (SELECT max_running FROM tenants WHERE queue = :queue AND tenant = :tenant) AS own,
       (SELECT max_running FROM queues WHERE name = :queue) AS queue_default

-- name: slot_insert
INSERT INTO slots (nonce, queue, tenant, holder, lease, deadline)
VALUES (:nonce, :queue, :tenant, :holder, :lease, :deadline)

-- name: slot_get
SELECT nonce, queue, tenant, lease, deadline FROM slots WHERE nonce = :nonce

-- name: slot_renew
UPDATE slots SET deadline = :deadline WHERE nonce = :nonce

-- name: slot_delete
DELETE FROM slots WHERE nonce = :nonce

-- name: slots_prune
-- Maintenance: every expired slot, found through slots_deadline.
DELETE FROM slots WHERE deadline <= :now

-- name: waiter_get
SELECT place FROM slot_waiters WHERE place = :place AND queue = :queue AND tenant = :tenant

-- name: waiter_park
-- Park a job refused a slot, or park a copy again: wakeable, its place in line kept.
INSERT INTO slot_waiters (place, queue, tenant, since, park, woken, touched)
VALUES (:place, :queue, :tenant, :now, :park, 0, :now)
ON CONFLICT (place) DO UPDATE SET park = excluded.park, woken = 0, touched = excluded.touched

-- name: waiter_delete
DELETE FROM slot_waiters WHERE place = :place

-- name: waiter_leave
-- A parked job whose timed copy was not sent leaves its line (none of its copies may run).
DELETE FROM slot_waiters WHERE place = :place AND queue = :queue AND tenant = :tenant

-- name: waiter_wake
-- A release hands out the oldest wakeable parked job of its (queue, tenant) (slot_waiters_line).
UPDATE slot_waiters SET woken = 1, touched = :now
WHERE place = (SELECT place FROM slot_waiters
               WHERE queue = :queue AND tenant = :tenant AND woken = 0
               ORDER BY since, place LIMIT 1)
RETURNING place, park

-- name: waiters_prune
-- Maintenance: lines nobody came back to for PARK_TTL (a timed copy touches its row).
DELETE FROM slot_waiters WHERE touched <= :before

-- name: job_types_all
SELECT * FROM job_types ORDER BY name

-- name: schema_objects
-- The schema as SQLite records it, for the migration test and the ownership check.
SELECT type, name, tbl_name FROM sqlite_master
WHERE name NOT LIKE 'sqlite_%'
ORDER BY type, name

-- name: figures_add
-- One count of a call's figures (fairq/backends/sqlite/figures.py), added in key order.
INSERT INTO figures (slot, tenant_id, kind, bucket, count)
VALUES (:slot, :tenant_id, :kind, :bucket, :count)
ON CONFLICT (slot, tenant_id, kind, bucket) DO UPDATE SET count = count + excluded.count

-- name: figures_prune
DELETE FROM figures WHERE slot < :first

-- name: figures_read
-- Inspection: the window's counts with their tenants (a forgotten tenant's are left out).
SELECT f.slot, f.kind, f.bucket, f.count, t.queue, t.tenant
FROM figures f JOIN tenants t ON t.id = f.tenant_id
WHERE f.slot >= :first AND (:queue IS NULL OR t.queue = :queue)

-- name: unique_get
-- The job holding a unique key, if any, and its state (NULL: the job is gone), through the
-- key's unique index and jobs' id index (fairq/backends/sqlite/unique.py).
SELECT u.job_id, u.job_queue, u.expires_at, u.hold, j.state
FROM unique_keys u LEFT JOIN jobs j ON j.id = u.job_id
WHERE u.queue = :queue AND u.tenant = :tenant AND u.key = :key

-- name: unique_put
INSERT INTO unique_keys (queue, tenant, key, job_id, job_queue, expires_at, hold)
VALUES (:queue, :tenant, :key, :job_id, :job_queue, :expires_at, :hold)
ON CONFLICT (queue, tenant, key) DO UPDATE SET
    job_id = excluded.job_id, job_queue = excluded.job_queue,
    expires_at = excluded.expires_at, hold = excluded.hold

-- name: unique_prune
-- Keys whose window ended hold nothing: found through unique_keys_expiry.
DELETE FROM unique_keys WHERE expires_at <= :now
