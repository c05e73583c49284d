-- dequeue.lua: maintain the queues asked, then hand out up to `limit` jobs fairly.
--
-- Maintenance per queue, in order: promote, expire, un-limit (as maintain.lua).
--
-- KEYS: one block of QUEUE_KEYS keys per distinct queue (see _lib.lua).
-- ARGV: [1] now, [2] limit, [3] worker id (not stored), [4 ..] the order in which to try
--       the queues, as block numbers (a queue may be named once).
-- Touches: every key of the blocks except bodies/tnames (read), tids and done.
-- Returns: {promoted, expired, block, id, record, body, tenant, block, id, ...}: each job
--       is what one single dequeue at `now` would give, in order. Counts are integers.

register('dequeue', function()
  local now = tonumber(ARGV[1])
  local limit = tonumber(ARGV[2])
  local order = {}
  for i = 4, #ARGV do order[#order + 1] = tonumber(ARGV[i]) end

  local queues = {}
  local promoted, expired = 0, 0
  for _, b in ipairs(order) do
    local q = open_queue(b, '')
    queues[b] = q
    local p, e = maintain_queue(q, now)
    promoted, expired = promoted + p, expired + e
  end

  local out = {promoted, expired}
  local taken = 0
  while taken < limit do
    local got, from = nil, nil
    for _, b in ipairs(order) do
      got = dispatch(queues[b], now)
      if got then from = b; break end
    end
    if got == nil then break end
    out[#out + 1] = from
    for _, v in ipairs(got) do out[#out + 1] = v end
    taken = taken + 1
  end

  for _, b in ipairs(order) do flush(queues[b]) end
  return out
end)
