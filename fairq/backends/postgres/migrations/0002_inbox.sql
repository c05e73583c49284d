-- fairq PostgreSQL schema, version 2: the inbox for enqueues inside the caller's transaction.
--
-- An enqueue that runs in the application's own transaction must not take fairq's locks (the
-- queue lock and the tenant row), because it would hold them until the application commits and
-- stall every worker of that queue meanwhile. It only inserts here; the next dispatch (or
-- maintenance) of the queue moves committed rows into jobs under the queue lock, in seq order.
-- seq comes from the jobs sequence, so enqueue order is one order across both paths.

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
    run_at        double precision NOT NULL
);

CREATE INDEX inbox_queue ON {schema}.inbox (queue, seq);
