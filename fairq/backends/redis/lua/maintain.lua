-- maintain.lua: promote due scheduled jobs, expire overdue leases, end rate limits that are
-- over (in that order, queue by queue), and prune old succeeded jobs (forgetting a tenant
-- whose last stored job is pruned: see `forget` in _lib.lua).
--
-- KEYS: [1] directory hash, then one block of QUEUE_KEYS keys per queue (see _lib.lua).
--       Blocks are shifted by one key: block b starts at KEYS[2 + (b-1) * QUEUE_KEYS].
-- ARGV: [1] now, [2] prune before ('' for no pruning), [3] number M of blocks to maintain
--       (the first M blocks, in order); the remaining blocks are only pruned.
-- Touches: every key of the blocks; the directory (pruned ids are deleted).
-- Returns: {promoted, expired, pruned, next_due ('' when nothing is pending)}: next_due is
--       the earliest pending run_at, lease deadline or limited_until.

register('maintain', function()
  local now = tonumber(ARGV[1])
  local before = opt(ARGV[2])
  local maintained = tonumber(ARGV[3])
  local directory = table.remove(KEYS, 1)
  local nblocks = #KEYS / QUEUE_KEYS

  local promoted, expired, pruned = 0, 0, 0
  local next_due = nil
  local opened = {}
  for b = 1, maintained do
    local q = open_queue(b, '')
    opened[b] = q
    local p, e = maintain_queue(q, now)
    promoted, expired = promoted + p, expired + e
    flush(q)
    next_due = next_due_of(q, next_due)
  end

  if before ~= nil then
    for b = 1, nblocks do
      pruned = pruned + prune(opened[b] or open_queue(b, ''), directory, before, now)
    end
  end

  return {promoted, expired, pruned, optfmt(next_due)}
end)
