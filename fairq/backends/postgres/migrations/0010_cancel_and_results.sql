-- fairq PostgreSQL schema, version 10: cancelled jobs (fairq/cancel.py) and kept results
-- (fairq/results.py).
-- A running job asked to stop gets cancel_requested (when it was asked); its heartbeat reports
-- it. A job that ends cancelled moves to succeeded_jobs, as a succeeded one does (it is
-- finished: the retention prunes it), with state 'cancelled'. A succeeded job may keep its
-- return value (result, JSON text) until result_until: the retention's index leaves it out,
-- and succeeded_jobs_results finds it once it expires. tenants.cancelled counts the tenant's
-- cancelled jobs (lifetime).
ALTER TABLE {schema}.jobs ADD COLUMN cancel_requested double precision;
ALTER TABLE {schema}.succeeded_jobs ADD COLUMN state text NOT NULL DEFAULT 'succeeded'
    CHECK (state IN ('succeeded', 'cancelled'));
ALTER TABLE {schema}.succeeded_jobs ADD COLUMN result text;
ALTER TABLE {schema}.succeeded_jobs ADD COLUMN result_until double precision;
DROP INDEX {schema}.succeeded_jobs_finished;
CREATE INDEX succeeded_jobs_finished ON {schema}.succeeded_jobs (finished_at)
    WHERE result_until IS NULL;
CREATE INDEX succeeded_jobs_results ON {schema}.succeeded_jobs (result_until)
    WHERE result_until IS NOT NULL;
ALTER TABLE {schema}.tenants ADD COLUMN cancelled bigint NOT NULL DEFAULT 0;
