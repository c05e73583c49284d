-- fairq PostgreSQL schema, version 9: unique keys (fairq/policy/unique.py, functions/unique.sql).
-- One row per key taken, in the scope of (queue as enqueued, tenant): the job that took it
-- (job_queue: where it went), the end of its window, and whether it holds for the whole window
-- rather than while its job is pending. digest is sha256 of the scope and key (tenant ids and
-- keys may be longer than an index entry); unique_keys_expiry lets maintenance delete the keys
-- whose window ended.
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
