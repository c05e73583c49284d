-- fairq SQLite schema, version 9: an iterative job's last checkpoint (Backend.checkpoint),
-- fairq.job.Progress.encode's JSON text; NULL: none yet.
ALTER TABLE jobs ADD COLUMN progress TEXT;
