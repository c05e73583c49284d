-- fairq PostgreSQL schema, version 2.
-- A published job carries its signature (JSON, see fairq/signatures.py), so a producer that
-- enqueues by name can refuse arguments that do not fit. NULL for declarations published
-- before: they cannot be checked.
ALTER TABLE {schema}.job_types ADD COLUMN signature text;
-- Each applied function file records the release of the function files that applied it, so an
-- older fairq never re-creates its functions over newer ones (sql.FUNCTIONS_RELEASE).
ALTER TABLE {schema}.fairq_functions ADD COLUMN release integer NOT NULL DEFAULT 0;
