-- maintain.lua: promote due scheduled jobs, expire overdue leases, end rate limits that are
-- over (in that order, queue by queue), and prune old succeeded jobs (forgetting a tenant
-- whose last stored job is pruned: see `forget` in _lib.lua).
--
-- KEYS: G keys shared by queues, then one block of QUEUE_KEYS keys per queue (see _lib.lua).
--       On a single Redis (G = 1): [1] the directory hash. On a Redis Cluster (G = 0: the
--       directory lives in other slots) the ids pruned are returned for the caller to take out
--       of the directory.
-- ARGV: [1] now (see `now_of`), [2] retention: prune the jobs that succeeded before
--       now - retention ('' for no pruning), [3] number M of blocks to maintain (the first M
--       blocks, in order); the remaining blocks are only pruned. [4] G.
-- Touches: every key of the blocks; the directory (pruned ids are deleted).
-- Returns: {promoted, pruned, next_due ('' when nothing is pending), expired, gone}: next_due
--       is the earliest pending run_at, lease deadline or limited_until; expired, the leases
--       expired (EXPIRED_FIELDS values each, in the order expired: see `expire`); gone, the
--       ids pruned when there is no directory key (else empty).

register('maintain', function()
  local now = now_of(ARGV[1])
  local retention = opt(ARGV[2])
  local maintained = tonumber(ARGV[3])
  local directory = take_globals(ARGV[4])[1]
  local nblocks = #KEYS / QUEUE_KEYS

  local promoted, pruned = 0, 0
  local expired, gone = {}, {}
  local next_due = nil
  local opened = {}
  for b = 1, maintained do
    local q = open_queue(b, '')
    opened[b] = q
    promoted = promoted + maintain_queue(q, now, expired)
    flush(q)
    next_due = next_due_of(q, next_due)
  end

  if retention ~= nil then
    local before = now - retention
    for b = 1, nblocks do
      pruned = pruned + prune(opened[b] or open_queue(b, ''), directory, before, now, gone)
    end
  end

  return {promoted, pruned, optfmt(next_due), expired, gone}
end)
