-- fairq SQLite schema, version 10: unique keys (fairq/policy/unique.py). One row per key
-- taken, in the scope of (queue as enqueued, tenant): the job that took it (job_queue: where
-- it went), the end of its window, and whether it holds for the whole window (hold = 1)
-- rather than while its job is pending. unique_keys_expiry lets maintenance delete the keys
-- whose window ended.
CREATE TABLE unique_keys (
    id         INTEGER PRIMARY KEY,
    queue      TEXT NOT NULL,
    tenant     TEXT NOT NULL,
    key        TEXT NOT NULL,
    job_id     TEXT NOT NULL,
    job_queue  TEXT NOT NULL,
    expires_at REAL NOT NULL,
    hold       INTEGER NOT NULL,
    UNIQUE (queue, tenant, key)
);

CREATE INDEX unique_keys_expiry ON unique_keys (expires_at);
