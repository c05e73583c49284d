-- fairq PostgreSQL schema, version 3.
-- A queue's cap on its leased jobs, all tenants together (QueueSettings.max_in_flight; NULL:
-- no cap), and its count of them, in_flight: kept only while the queue is capped (dispatch adds
-- what it hands out, every end of a lease takes it off), counted again from the jobs whenever
-- set_queue stores the settings, and 0 while uncapped, so an uncapped queue's acks never write
-- its row (functions/dispatch.sql, acks.sql; events.py).
ALTER TABLE {schema}.queues ADD COLUMN max_in_flight integer CHECK (max_in_flight >= 1);
ALTER TABLE {schema}.queues ADD COLUMN in_flight bigint NOT NULL DEFAULT 0
    CHECK (in_flight >= 0);
