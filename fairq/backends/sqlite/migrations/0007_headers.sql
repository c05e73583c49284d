-- fairq SQLite schema, version 7: a job's headers (NewJob.headers), small str metadata that
-- travels with every lease, as compact JSON text; NULL for none (fairq.job.encode_headers).
ALTER TABLE jobs ADD COLUMN headers TEXT;
