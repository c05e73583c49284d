-- fairq PostgreSQL schema, version 11: learned job costs (fairq/policy/cost.py) and relayed
-- claims (DequeueParams.hold).
-- A job declared learn_cost = false is always charged its declared cost (jobs, the inbox and
-- the published job types carry the flag). claimed: a running job's run has started; a job
-- the relay took (a dequeue with a hold) is not claimed until a peer's worker claims it. Jobs
-- stored before this version keep running as they were: claimed, learning their cost.
-- job_costs holds each (queue, job name)'s learned run time: runs (samples folded in, at
-- most 20) and mean; key is sha256(queue || '/' || name) (a queue name has no '/', and a job
-- name may be longer than an index entry). A row exists once its first sample is in.
ALTER TABLE {schema}.jobs ADD COLUMN learn_cost boolean NOT NULL DEFAULT true;
ALTER TABLE {schema}.jobs ADD COLUMN claimed boolean NOT NULL DEFAULT true;
ALTER TABLE {schema}.inbox ADD COLUMN learn_cost boolean NOT NULL DEFAULT true;
ALTER TABLE {schema}.job_types ADD COLUMN learn_cost boolean NOT NULL DEFAULT true;
CREATE TABLE {schema}.job_costs (
    key   bytea PRIMARY KEY,
    queue text COLLATE "C" NOT NULL,
    name  text COLLATE "C" NOT NULL,
    runs  integer NOT NULL CHECK (runs BETWEEN 1 AND 20),
    mean  double precision NOT NULL
);
