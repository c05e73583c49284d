-- fairq PostgreSQL schema: the tables and indexes, in one file, for reading.
--
-- It must equal what applying migrations/0001… in order gives; tests/postgres/test_migrations.py
-- compares the catalogs of both. A change to the tables is a new migration plus the same change
-- here. Migrations and this file hold DDL only: the functions live in functions/*.sql, applied
-- when their text changes. {schema} is replaced by the quoted schema name.

CREATE SCHEMA IF NOT EXISTS {schema};

CREATE TABLE {schema}.fairq_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- The plpgsql/SQL functions (functions/*.sql) are not migrations: each file is (re)created
-- when its text changes, and this table keeps the sha256 of the text last applied and the
-- release of the function files that applied it (sql.FUNCTIONS_RELEASE; migrate.py).
CREATE TABLE {schema}.fairq_functions (
    file       text PRIMARY KEY,
    sha256     text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    release    integer NOT NULL DEFAULT 0
);

-- One row per queue: the defaults its tenants inherit, and its virtual clock V. Dispatches in
-- one queue are serialised by a transaction-scoped advisory lock keyed on (schema, queue), not
-- by a lock on this row, so readers of V (enqueue, ack) can share it without MultiXacts.
-- max_in_flight caps the queue's leased jobs (all tenants); in_flight counts them only while it
-- is set (0 otherwise), so the ends of leases of an uncapped queue never write this row.
CREATE TABLE {schema}.queues (
    name        text COLLATE "C" PRIMARY KEY,
    weight      double precision NOT NULL DEFAULT 1.0 CHECK (weight > 0),
    max_running integer CHECK (max_running >= 1),   -- NULL: no cap
    vclock      double precision NOT NULL DEFAULT 0.0,
    rate_count  integer CHECK (rate_count >= 1),      -- NULL: no rate limit
    rate_period double precision CHECK (rate_period > 0),
    rate_burst  integer CHECK (rate_burst >= 1),
    half_life   double precision CHECK (half_life > 0), -- NULL: no history
    max_debt    double precision NOT NULL DEFAULT 60.0,
    max_in_flight integer CHECK (max_in_flight >= 1), -- NULL: no cap on leased jobs
    in_flight   bigint NOT NULL DEFAULT 0 CHECK (in_flight >= 0)
);

-- One row per (queue, tenant). weight/max_running are the effective settings (own setting,
-- else the queue's default), kept current by set_queue so dispatch never joins queues.
-- start_tag is NULL exactly when the tenant is not eligible; head_seq is its ready head.
-- tenant_key is sha256(tenant): tenant ids have no length limit but btree entries do, so the
-- unique index holds the digest and lookups compare the full text as well.
CREATE TABLE {schema}.tenants (
    id              bigserial PRIMARY KEY,
    queue           text COLLATE "C" NOT NULL,
    tenant          text COLLATE "C" NOT NULL,
    tenant_key      bytea NOT NULL,
    own_weight      double precision,               -- NULL: the queue's default
    own_max_running integer,                        -- NULL: the queue's default
    weight          double precision NOT NULL,
    max_running     integer,                        -- NULL: no cap
    finish_tag      double precision NOT NULL DEFAULT 0.0,
    start_tag       double precision,
    head_seq        bigint,
    ready           bigint NOT NULL DEFAULT 0 CHECK (ready >= 0),
    scheduled       bigint NOT NULL DEFAULT 0 CHECK (scheduled >= 0),
    running         bigint NOT NULL DEFAULT 0 CHECK (running >= 0),
    succeeded       bigint NOT NULL DEFAULT 0,
    failed          bigint NOT NULL DEFAULT 0,
    dead            bigint NOT NULL DEFAULT 0 CHECK (dead >= 0),
    own_rate_count  integer,                        -- NULL: the queue's default
    own_rate_period double precision,
    own_rate_burst  integer,
    rate_count      integer,                        -- effective; NULL: no rate limit
    rate_period     double precision,
    rate_burst      integer,
    tat             double precision,               -- GCRA theoretical arrival time
    limited_until   double precision,               -- set while waiting on its rate
    usage           double precision NOT NULL DEFAULT 0.0,  -- recent service, decaying
    usage_at        double precision NOT NULL DEFAULT 0.0,
    kept            bigint NOT NULL DEFAULT 0 CHECK (kept >= 0),  -- succeeded/cancelled stored
    cancelled       bigint NOT NULL DEFAULT 0,      -- jobs cancelled (lifetime)
    fig_slot        bigint NOT NULL DEFAULT 0,      -- the slot of fig_keys/fig_counts
    fig_keys        integer[] NOT NULL DEFAULT '{}', -- figures of that slot: bucket (a wait)
    fig_counts      integer[] NOT NULL DEFAULT '{}', -- or 32 + bucket (a succeeded run), count
    UNIQUE (queue, tenant_key)
);

-- Dispatch reads the first entry: smallest (start tag, head seq) among eligible tenants.
CREATE INDEX tenants_eligible ON {schema}.tenants (queue, start_tag, head_seq)
    WHERE start_tag IS NOT NULL;

-- Maintenance ends rate limits in (limited_until, tenant) order: a range of this index, the
-- ties sorted by the tenant text (COLLATE "C": UTF-8 byte order, which is code-point order).
-- The tenant text is not an index column: btree entries are limited in size, tenant ids not.
CREATE INDEX tenants_limited ON {schema}.tenants (queue, limited_until)
    WHERE limited_until IS NOT NULL;

-- seq is enqueue order (a sequence value is never reused, even after pruning). tenant_id names
-- the (queue, tenant) row, so a long tenant id is stored once, not in every job. A succeeded
-- job is moved to succeeded_jobs by its ack, so jobs holds only jobs still to run, running or
-- dead: every later dispatch and ack walks a table and indexes not swollen by finished jobs.
CREATE TABLE {schema}.jobs (
    seq           bigserial PRIMARY KEY,
    id            text NOT NULL UNIQUE,
    tenant_id     bigint NOT NULL,
    queue         text COLLATE "C" NOT NULL,
    name          text NOT NULL,
    state         text NOT NULL CHECK (state IN ('scheduled', 'ready', 'running', 'dead')),
    payload       text NOT NULL,
    priority      integer NOT NULL,
    attempts      integer NOT NULL DEFAULT 0,
    max_attempts  integer NOT NULL,
    lease_timeout double precision NOT NULL,
    cost          double precision NOT NULL,
    enqueued_at   double precision NOT NULL,
    run_at        double precision NOT NULL,
    ready_at      double precision,                -- when it last became ready
    started_at    double precision,
    deadline      double precision,                -- set only while running
    finished_at   double precision,
    last_error    text,
    worker_id     text,
    leases        integer NOT NULL DEFAULT 0,      -- dispatches so far; names the lease
    charged       double precision NOT NULL DEFAULT 0.0, -- what this run was charged so far
    headers       text,                            -- JSON object of str; NULL: none
    progress      text,                            -- last checkpoint (JSON); NULL: none
    cancel_requested double precision,             -- a running job asked to stop (then)
    learn_cost    boolean NOT NULL DEFAULT true,   -- false: always charged its cost
    claimed       boolean NOT NULL DEFAULT true    -- running: its run has started (a relayed
                                                   -- job's not until a worker claims it)
);

CREATE INDEX jobs_ready ON {schema}.jobs (tenant_id, priority DESC, seq) WHERE state = 'ready';
CREATE INDEX jobs_scheduled ON {schema}.jobs (queue, run_at, seq) WHERE state = 'scheduled';
CREATE INDEX jobs_running ON {schema}.jobs (queue, deadline, seq) WHERE state = 'running';
CREATE INDEX jobs_dead ON {schema}.jobs (finished_at, seq) WHERE state = 'dead';

-- Succeeded jobs, kept for the retention (get_jobs, duplicate ids), moved here by the ack:
-- insert-only. Cancelled jobs (fairq/cancel.py) are moved here too, with their state. A
-- succeeded job may keep its return value (result, JSON) until result_until: it is then
-- pruned by succeeded_jobs_results, not by the retention. The queue of a succeeded job is
-- its tenant row's: a tenant is kept while it has succeeded jobs (kept). An id is unique across both tables: an enqueue inserts into jobs
-- first (waiting for an ack moving the same id), then looks its ids up here in a new
-- statement, which sees that ack's row (queries/jobs.sql: succeeded_ids, jobs_drop_if_succeeded).
CREATE TABLE {schema}.succeeded_jobs (
    id           text PRIMARY KEY,
    seq          bigint NOT NULL,
    tenant_id    bigint NOT NULL,
    priority     integer NOT NULL,
    attempts     integer NOT NULL,
    max_attempts integer NOT NULL,
    enqueued_at  double precision NOT NULL,
    run_at       double precision NOT NULL,
    started_at   double precision,
    finished_at  double precision,
    name         text NOT NULL,
    payload      text NOT NULL,
    last_error   text,
    ready_at     double precision,
    headers      text,
    state        text NOT NULL DEFAULT 'succeeded' CHECK (state IN ('succeeded', 'cancelled')),
    result       text,
    result_until double precision
);

CREATE INDEX succeeded_jobs_finished ON {schema}.succeeded_jobs (finished_at)
    WHERE result_until IS NULL;
CREATE INDEX succeeded_jobs_results ON {schema}.succeeded_jobs (result_until)
    WHERE result_until IS NOT NULL;

-- Job declarations published by workers, so producers can enqueue by name alone.
CREATE TABLE {schema}.job_types (
    name          text PRIMARY KEY,
    queue         text NOT NULL,
    tenant_arg    text,
    params        text[] NOT NULL,                -- positional parameter names, in order
    max_attempts  integer NOT NULL,
    lease_timeout double precision NOT NULL,
    cost          double precision NOT NULL,
    throttle      text NOT NULL DEFAULT '[]',     -- [{"threshold", "per", "queue"}, …] as JSON
    signature     text,                           -- fairq.contract.jobtypes.JobSignature as JSON
    learn_cost    boolean NOT NULL DEFAULT true
);

-- Jobs whose tenant row an enqueue could not take: enqueues made inside the caller's
-- transaction (transactional.py), which must not take fairq's locks (they would be held until
-- the application commits and stall the queue's workers), and enqueues whose tenant another
-- transaction held (functions/enqueue.sql). They wait here until whoever holds the tenant next
-- (an enqueue, a dispatch, maintenance) takes them in. seq comes from the jobs sequence, so
-- enqueue order is one order across both ways in. tenant_key is sha256(tenant), as in tenants.
CREATE TABLE {schema}.inbox (
    seq           bigint PRIMARY KEY DEFAULT nextval('{schema}.jobs_seq_seq'),
    id            text NOT NULL UNIQUE,
    queue         text COLLATE "C" NOT NULL,
    tenant        text COLLATE "C" NOT NULL,
    name          text NOT NULL,
    payload       text NOT NULL,
    priority      integer NOT NULL,
    max_attempts  integer NOT NULL,
    lease_timeout double precision NOT NULL,
    cost          double precision NOT NULL,
    enqueued_at   double precision NOT NULL,
    run_at        double precision NOT NULL,
    headers       text,
    tenant_key    bytea NOT NULL,
    learn_cost    boolean NOT NULL DEFAULT true
);

CREATE INDEX inbox_queue ON {schema}.inbox (queue, seq);
CREATE INDEX inbox_tenant ON {schema}.inbox (queue, tenant_key, seq);

-- Throttle windows: the newest enqueue times per (job name, tenant), at most max threshold + 1,
-- deleted once older than the longest rule's window (throttling.py).
CREATE TABLE {schema}.throttle_windows (
    key        bytea PRIMARY KEY,
    name       text NOT NULL,
    tenant     text COLLATE "C" NOT NULL,
    times      double precision[] NOT NULL,
    span       double precision NOT NULL,
    last_at    double precision NOT NULL,
    expires_at double precision NOT NULL
);

CREATE INDEX throttle_windows_expiry ON {schema}.throttle_windows (expires_at);

-- Tenant slots (slots.py): one row per slot held, by its nonce; a (queue, tenant) is found
-- through its tenant_key, sha256(tenant) as in tenants. Acquire, renew and release of a
-- (queue, tenant) take turns on a transaction-scoped advisory lock of their own.
CREATE TABLE {schema}.slots (
    nonce      text PRIMARY KEY,
    queue      text COLLATE "C" NOT NULL,
    tenant     text COLLATE "C" NOT NULL,
    tenant_key bytea NOT NULL,
    holder     text NOT NULL,
    lease      double precision NOT NULL,
    deadline   double precision NOT NULL
);

CREATE INDEX slots_place ON {schema}.slots (queue, tenant_key, deadline);
CREATE INDEX slots_deadline ON {schema}.slots (deadline);

-- Jobs parked for a tenant slot (slots.py, fairq/policy/slots.py): one row per parked job, by
-- its place; a release wakes the oldest not yet woken of its (queue, tenant).
CREATE TABLE {schema}.slot_waiters (
    place      text PRIMARY KEY,
    queue      text COLLATE "C" NOT NULL,
    tenant     text COLLATE "C" NOT NULL,
    tenant_key bytea NOT NULL,
    since      double precision NOT NULL,
    park       text NOT NULL,
    woken      boolean NOT NULL DEFAULT false,
    touched    double precision NOT NULL
);

CREATE INDEX slot_waiters_line ON {schema}.slot_waiters (queue, tenant_key, woken, since);
CREATE INDEX slot_waiters_touched ON {schema}.slot_waiters (touched);

-- Per-tenant figures (fairq/figures.py): counts per (slot, tenant, kind, bucket); kind 'w'
-- waits and 'r' run times by histogram bucket, 'o' ends by outcome. Old slots are deleted by
-- maintain. The waits of dispatches and the run times of acks are counted first in their
-- tenant's row (tenants.fig_*, one slot), which those calls write anyway, and added here when
-- the tenant's slot changes (functions/figures.sql); a reader adds both.
CREATE TABLE {schema}.figures (
    slot      bigint NOT NULL,
    tenant_id bigint NOT NULL,
    kind      text COLLATE "C" NOT NULL,
    bucket    integer NOT NULL,
    count     bigint NOT NULL,
    PRIMARY KEY (slot, tenant_id, kind, bucket)
);

-- Unique keys (fairq/policy/unique.py, functions/unique.sql): one row per key taken, in the
-- scope of (queue as enqueued, tenant): the job that took it (job_queue: where it went), the
-- end of its window, and whether it holds for the whole window rather than while its job is
-- pending. digest is sha256 of the scope and key (tenant ids and keys may be longer than an
-- index entry); unique_keys_expiry lets maintenance delete the keys whose window ended.
CREATE TABLE {schema}.unique_keys (
    digest     bytea PRIMARY KEY,
    queue      text COLLATE "C" NOT NULL,
    tenant     text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    job_id     text NOT NULL,
    job_queue  text COLLATE "C" NOT NULL,
    expires_at double precision NOT NULL,
    hold       boolean NOT NULL
);

CREATE INDEX unique_keys_expiry ON {schema}.unique_keys (expires_at);

-- Learned job costs (fairq/policy/cost.py): per (queue, job name), the samples folded in (at
-- most 20) and their mean, the estimate a dispatch charges (functions/costs.sql). key is
-- sha256(queue || '/' || name): a queue name has no '/', and a job name may be longer than an
-- index entry. A row exists once its first sample is in.
CREATE TABLE {schema}.job_costs (
    key   bytea PRIMARY KEY,
    queue text COLLATE "C" NOT NULL,
    name  text COLLATE "C" NOT NULL,
    runs  integer NOT NULL CHECK (runs BETWEEN 1 AND 20),
    mean  double precision NOT NULL
);
