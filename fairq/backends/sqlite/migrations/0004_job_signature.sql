-- fairq SQLite schema, version 4: a published job carries its signature (JSON, see
-- fairq/signatures.py), so a producer that enqueues by name can refuse arguments that do not
-- fit. NULL for declarations published before: they cannot be checked.
ALTER TABLE job_types ADD COLUMN signature TEXT;
