-- name: history_page
-- A queue's jobs enqueued in [since, until), in seq order from after the cursor: a walk of
-- the primary key (rows of other queues and times are passed over, so a whole read visits
-- the table once), one page at a time.
SELECT j.seq, j.id, j.name, t.tenant, j.state, j.priority, j.attempts, j.cost,
       j.enqueued_at, j.run_at, j.started_at, j.finished_at
FROM jobs j JOIN tenants t ON t.id = j.tenant_id
WHERE j.seq > :after AND j.queue = :queue
  AND j.enqueued_at >= :since AND j.enqueued_at < :until
ORDER BY j.seq
LIMIT :limit
