-- fairq SQLite schema, version 12: learned job costs and relayed claims (fairq/policy/cost.py,
-- docs/internals/scheduler.md "Learned cost").
--
-- job_costs: per (queue, job name) the samples folded in (runs, at most cost.WINDOW) and their
-- mean; a row appears with the first sample. Every ack and reported failure of a claimed run
-- updates it in the same transaction; dispatch reads it (one primary-key lookup per queue and
-- name per call).
--
-- jobs.learn_cost: 0 for a job declared learn_cost=False (always charged its cost).
-- jobs.claimed: 1 once its run started (at dispatch, or for a relayed job at its claim). Jobs
-- stored by an older fairq learn their cost, and the running ones were handed to native
-- workers: claimed.
CREATE TABLE job_costs (
    queue TEXT NOT NULL,
    name  TEXT NOT NULL,
    runs  INTEGER NOT NULL,
    mean  REAL NOT NULL,
    PRIMARY KEY (queue, name)
) WITHOUT ROWID;

ALTER TABLE jobs ADD COLUMN learn_cost INTEGER NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN claimed INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET claimed = 1 WHERE state = 'running';

ALTER TABLE job_types ADD COLUMN learn_cost INTEGER NOT NULL DEFAULT 1;
