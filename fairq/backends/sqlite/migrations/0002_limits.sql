-- fairq SQLite schema, version 2: rate limits, paused tenants, charging as jobs run, recent
-- usage, lease counters and throttle windows (issue 5). Only adds: a store written by version
-- 1 keeps every job, tenant and counter, and its outstanding leases stay valid.

-- Queue defaults: a rate limit (NULL count: none), and history-aware fairness.
ALTER TABLE queues ADD COLUMN rate_count INTEGER;
ALTER TABLE queues ADD COLUMN rate_period REAL;
ALTER TABLE queues ADD COLUMN rate_burst INTEGER;
ALTER TABLE queues ADD COLUMN half_life REAL;           -- NULL: idle tenants carry no history
ALTER TABLE queues ADD COLUMN max_debt REAL NOT NULL DEFAULT 60.0;

-- A tenant's own rate (NULL count: the queue's default) and the effective one, kept up to date
-- like weight and max_running; its GCRA state; its recent service, decaying.
ALTER TABLE tenants ADD COLUMN own_rate_count INTEGER;
ALTER TABLE tenants ADD COLUMN own_rate_period REAL;
ALTER TABLE tenants ADD COLUMN own_rate_burst INTEGER;
ALTER TABLE tenants ADD COLUMN rate_count INTEGER;
ALTER TABLE tenants ADD COLUMN rate_period REAL;
ALTER TABLE tenants ADD COLUMN rate_burst INTEGER;
ALTER TABLE tenants ADD COLUMN tat REAL;                -- NULL until its first start under a rate
ALTER TABLE tenants ADD COLUMN limited_until REAL;      -- set while waiting on its rate limit
ALTER TABLE tenants ADD COLUMN usage REAL NOT NULL DEFAULT 0.0;
ALTER TABLE tenants ADD COLUMN usage_at REAL NOT NULL DEFAULT 0.0;

-- Maintenance reads the first entries: the tenants whose rate limit ends first.
CREATE INDEX tenants_limited ON tenants (queue, limited_until, tenant)
    WHERE limited_until IS NOT NULL;

-- leases counts every dispatch (never decremented) and names the current lease; charged is
-- what the current run has been charged so far. Version 1 named a lease "{id}:{attempts}" and
-- could reuse a number (release, requeue) but never went past max_attempts. So a running job
-- keeps its live lease (leases = attempts, charged its estimate at dispatch), and every other
-- job starts past any number version 1 could have handed out.
ALTER TABLE jobs ADD COLUMN leases INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN charged REAL NOT NULL DEFAULT 0.0;
UPDATE jobs SET leases = attempts, charged = cost WHERE state = 'running';
UPDATE jobs SET leases = max(attempts, max_attempts) WHERE state <> 'running';

-- JSON array of {"threshold", "per", "queue"} rules.
ALTER TABLE job_types ADD COLUMN throttle TEXT NOT NULL DEFAULT '[]';

-- Throttle windows: the recent enqueue times of one (job name, tenant), in recording order
-- (id), at most the rules' window size of them. Every row of a window carries the window's
-- span (longest rule window, as of its last recording) and newest time, so a window expires
-- whole once last_at < now - span, as a Redis key's TTL and PostgreSQL's row do;
-- expires_at = last_at + span lets maintenance find expired windows through an index.
CREATE TABLE throttle_times (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    tenant     TEXT NOT NULL,
    at         REAL NOT NULL,
    span       REAL NOT NULL,
    last_at    REAL NOT NULL,
    expires_at REAL NOT NULL
);

CREATE INDEX throttle_times_key ON throttle_times (name, tenant, id);
CREATE INDEX throttle_times_expiry ON throttle_times (expires_at);
