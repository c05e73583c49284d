-- fairq PostgreSQL schema, version 7: an iterative job's last checkpoint (Backend.checkpoint),
-- fairq.job.Progress.encode's JSON text; NULL: none yet. Not carried into succeeded_jobs: a
-- finished iteration has nothing to resume.
ALTER TABLE {schema}.jobs ADD COLUMN progress text;
