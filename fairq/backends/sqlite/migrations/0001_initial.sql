-- fairq SQLite schema, version 1.
--
-- The scheduler reads only indexes: tenants carry their own counters, start tag and head job,
-- so no hot path counts or scans jobs. The runner records the version in fairq_meta in the
-- same transaction that applies this file.

CREATE TABLE fairq_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

-- One row per queue: the defaults its tenants inherit, and its virtual clock V.
CREATE TABLE queues (
    name        TEXT PRIMARY KEY,
    weight      REAL NOT NULL DEFAULT 1.0,
    max_running INTEGER,               -- NULL: no cap
    vclock      REAL NOT NULL DEFAULT 0.0
) WITHOUT ROWID;

-- One row per (queue, tenant). weight/max_running are the effective settings (own setting,
-- else the queue's default), kept up to date by set_queue so dispatch never joins queues.
-- start_tag is NULL exactly when the tenant is not eligible; head_seq is its ready head.
CREATE TABLE tenants (
    id              INTEGER PRIMARY KEY,
    queue           TEXT NOT NULL,
    tenant          TEXT NOT NULL,
    own_weight      REAL,              -- NULL: the queue's default
    own_max_running INTEGER,           -- NULL: the queue's default
    weight          REAL NOT NULL,
    max_running     INTEGER,           -- NULL: no cap
    finish_tag      REAL NOT NULL DEFAULT 0.0,
    start_tag       REAL,
    head_seq        INTEGER,
    ready           INTEGER NOT NULL DEFAULT 0,
    scheduled       INTEGER NOT NULL DEFAULT 0,
    running         INTEGER NOT NULL DEFAULT 0,
    succeeded       INTEGER NOT NULL DEFAULT 0,
    failed          INTEGER NOT NULL DEFAULT 0,
    dead            INTEGER NOT NULL DEFAULT 0,
    UNIQUE (queue, tenant)
);

-- Dispatch reads the first entry: smallest (start tag, head seq) among eligible tenants.
CREATE INDEX tenants_eligible ON tenants (queue, start_tag, head_seq)
    WHERE start_tag IS NOT NULL;

-- seq is enqueue order; AUTOINCREMENT so a pruned job's seq is never reused.
-- tenant_id names the (queue, tenant) row, so the ready index needs no queue column and a
-- long tenant id is stored once, not in every job and index entry.
CREATE TABLE jobs (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,
    tenant_id     INTEGER NOT NULL,
    queue         TEXT NOT NULL,
    name          TEXT NOT NULL,
    state         TEXT NOT NULL
                  CHECK (state IN ('scheduled', 'ready', 'running', 'succeeded', 'dead')),
    payload       TEXT NOT NULL,
    priority      INTEGER NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    max_attempts  INTEGER NOT NULL,
    lease_timeout REAL NOT NULL,
    cost          REAL NOT NULL,
    enqueued_at   REAL NOT NULL,
    run_at        REAL NOT NULL,
    ready_at      REAL,                -- when it last became ready (for oldest_ready_at)
    started_at    REAL,
    deadline      REAL,                -- set only while running
    finished_at   REAL,
    last_error    TEXT,
    worker_id     TEXT
);

CREATE INDEX jobs_ready ON jobs (tenant_id, priority DESC, seq) WHERE state = 'ready';
CREATE INDEX jobs_scheduled ON jobs (queue, run_at, seq) WHERE state = 'scheduled';
CREATE INDEX jobs_running ON jobs (queue, deadline, seq) WHERE state = 'running';
CREATE INDEX jobs_dead ON jobs (finished_at, seq) WHERE state = 'dead';
CREATE INDEX jobs_succeeded ON jobs (finished_at) WHERE state = 'succeeded';

-- Job declarations published by workers, so producers can enqueue by name alone.
CREATE TABLE job_types (
    name          TEXT PRIMARY KEY,
    queue         TEXT NOT NULL,
    tenant_arg    TEXT,
    params        TEXT NOT NULL,       -- JSON array of positional parameter names
    max_attempts  INTEGER NOT NULL,
    lease_timeout REAL NOT NULL,
    cost          REAL NOT NULL
) WITHOUT ROWID;
