-- fairq PostgreSQL schema, version 5: a job's headers (NewJob.headers), small str metadata
-- that travels with every lease, as compact JSON text, NULL for none
-- (fairq.job.encode_headers), in jobs, succeeded_jobs and the inbox; succeeded_jobs also keeps
-- when the job last became ready (JobInfo.ready_at).
ALTER TABLE {schema}.jobs ADD COLUMN headers text;
ALTER TABLE {schema}.succeeded_jobs ADD COLUMN ready_at double precision;
ALTER TABLE {schema}.succeeded_jobs ADD COLUMN headers text;
ALTER TABLE {schema}.inbox ADD COLUMN headers text;
