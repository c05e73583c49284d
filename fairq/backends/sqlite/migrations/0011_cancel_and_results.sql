-- fairq SQLite schema, version 11: cancelled jobs (fairq/cancel.py) and kept results
-- (fairq/results.py).
--
-- A job may end 'cancelled', which the CHECK on jobs.state refuses: SQLite cannot change a
-- constraint in place, so jobs is rebuilt (SQLite's documented way: a new table, the rows
-- copied with their seq, the old one dropped, the new one renamed, the indexes made again).
-- Its AUTOINCREMENT counter is carried over, so a pruned job's seq is still never reused.
-- MERGE NOTE: this copies every column jobs has at version 9; a migration of another branch
-- that adds a column to jobs before this one must add it to jobs_new and the copy too.
--
-- New columns: result (the return value kept, JSON text; NULL: none), result_until (when the
-- job is deleted with it), cancel_requested (1: a running job was asked to stop). A succeeded
-- job with a result is found by jobs_results when it expires, not by jobs_succeeded (which
-- the retention prunes); cancelled jobs are pruned by the retention through jobs_cancelled.
-- tenants.cancelled counts the tenant's cancelled jobs (lifetime).
CREATE TABLE jobs_new (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    id               TEXT NOT NULL UNIQUE,
    tenant_id        INTEGER NOT NULL,
    queue            TEXT NOT NULL,
    name             TEXT NOT NULL,
    state            TEXT NOT NULL
                     CHECK (state IN ('scheduled', 'ready', 'running', 'succeeded', 'dead',
                                      'cancelled')),
    payload          TEXT NOT NULL,
    priority         INTEGER NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    lease_timeout    REAL NOT NULL,
    cost             REAL NOT NULL,
    enqueued_at      REAL NOT NULL,
    run_at           REAL NOT NULL,
    ready_at         REAL,
    started_at       REAL,
    deadline         REAL,
    finished_at      REAL,
    last_error       TEXT,
    worker_id        TEXT,
    leases           INTEGER NOT NULL DEFAULT 0,
    charged          REAL NOT NULL DEFAULT 0.0,
    headers          TEXT,
    progress         TEXT,
    result           TEXT,
    result_until     REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0
);

INSERT INTO jobs_new (
    seq, id, tenant_id, queue, name, state, payload, priority, attempts, max_attempts,
    lease_timeout, cost, enqueued_at, run_at, ready_at, started_at, deadline, finished_at,
    last_error, worker_id, leases, charged, headers, progress
)
SELECT seq, id, tenant_id, queue, name, state, payload, priority, attempts, max_attempts,
       lease_timeout, cost, enqueued_at, run_at, ready_at, started_at, deadline, finished_at,
       last_error, worker_id, leases, charged, headers, progress
FROM jobs;

-- The counter of jobs, which may be past every seq still stored (pruned jobs), goes with it.
DELETE FROM sqlite_sequence WHERE name = 'jobs_new';
INSERT INTO sqlite_sequence (name, seq)
SELECT 'jobs_new', seq FROM sqlite_sequence WHERE name = 'jobs';

DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;

CREATE INDEX jobs_ready ON jobs (tenant_id, priority DESC, seq) WHERE state = 'ready';
CREATE INDEX jobs_scheduled ON jobs (queue, run_at, seq) WHERE state = 'scheduled';
CREATE INDEX jobs_running ON jobs (queue, deadline, seq) WHERE state = 'running';
CREATE INDEX jobs_dead ON jobs (finished_at, seq) WHERE state = 'dead';
CREATE INDEX jobs_succeeded ON jobs (finished_at)
    WHERE state = 'succeeded' AND result_until IS NULL;
CREATE INDEX jobs_cancelled ON jobs (finished_at) WHERE state = 'cancelled';
CREATE INDEX jobs_results ON jobs (result_until) WHERE result_until IS NOT NULL;

ALTER TABLE tenants ADD COLUMN cancelled INTEGER NOT NULL DEFAULT 0;
