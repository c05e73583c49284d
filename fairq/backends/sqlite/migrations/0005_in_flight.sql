-- fairq SQLite schema, version 5: a queue's cap on its leased jobs, all tenants together
-- (QueueSettings.max_in_flight). NULL: no cap. The count it caps is not stored: dispatch counts
-- the queue's running jobs through jobs_running (consuming.py).
ALTER TABLE queues ADD COLUMN max_in_flight INTEGER;
