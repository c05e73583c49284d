-- fairq PostgreSQL schema, version 1.
--
-- Every name is qualified with {schema} (replaced by the quoted schema name when the file is
-- loaded), so fairq can live beside an application's own tables and never depends on the
-- caller's search_path. The runner (fairq/backends/postgres/migrate.py) applies this file and
-- records it in fairq_migrations in one transaction.
--
-- The scheduler reads only indexes: tenants carry their counters, start tag and head job, so
-- no hot-path statement counts or scans jobs (tests/postgres/test_query_plans.py checks it).

CREATE SCHEMA IF NOT EXISTS {schema};

CREATE TABLE {schema}.fairq_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- One row per queue: the defaults its tenants inherit, and its virtual clock V. Dispatches in
-- one queue are serialised by a transaction-scoped advisory lock keyed on (schema, queue), not
-- by a lock on this row, so readers of V (enqueue, ack) can share it without MultiXacts.
CREATE TABLE {schema}.queues (
    name        text COLLATE "C" PRIMARY KEY,
    weight      double precision NOT NULL DEFAULT 1.0 CHECK (weight > 0),
    max_running integer CHECK (max_running >= 1),   -- NULL: no cap
    vclock      double precision NOT NULL DEFAULT 0.0
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
    UNIQUE (queue, tenant_key)
);

-- Dispatch reads the first entry: smallest (start tag, head seq) among eligible tenants.
CREATE INDEX tenants_eligible ON {schema}.tenants (queue, start_tag, head_seq)
    WHERE start_tag IS NOT NULL;

-- seq is enqueue order (a sequence value is never reused, even after pruning). tenant_id names
-- the (queue, tenant) row, so a long tenant id is stored once, not in every job.
CREATE TABLE {schema}.jobs (
    seq           bigserial PRIMARY KEY,
    id            text NOT NULL UNIQUE,
    tenant_id     bigint NOT NULL,
    queue         text COLLATE "C" NOT NULL,
    name          text NOT NULL,
    state         text NOT NULL
                  CHECK (state IN ('scheduled', 'ready', 'running', 'succeeded', 'dead')),
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
    worker_id     text
);

CREATE INDEX jobs_ready ON {schema}.jobs (tenant_id, priority DESC, seq) WHERE state = 'ready';
CREATE INDEX jobs_scheduled ON {schema}.jobs (queue, run_at, seq) WHERE state = 'scheduled';
CREATE INDEX jobs_running ON {schema}.jobs (queue, deadline, seq) WHERE state = 'running';
CREATE INDEX jobs_dead ON {schema}.jobs (finished_at, seq) WHERE state = 'dead';
CREATE INDEX jobs_succeeded ON {schema}.jobs (finished_at) WHERE state = 'succeeded';

-- Job declarations published by workers, so producers can enqueue by name alone.
CREATE TABLE {schema}.job_types (
    name          text PRIMARY KEY,
    queue         text NOT NULL,
    tenant_arg    text,
    params        text[] NOT NULL,                -- positional parameter names, in order
    max_attempts  integer NOT NULL,
    lease_timeout double precision NOT NULL,
    cost          double precision NOT NULL
);
